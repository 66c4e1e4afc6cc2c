# Two commands on a fresh clone: `make serve` and `make test`. Everything else they need is set up here.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
BUF_VERSION := 1.75.0
BUF := .tools/node_modules/.bin/buf
PROTOS := $(wildcard protos/ragsvc/v1/*.proto)

.PHONY: serve test generate lint-proto format-proto bench clean

serve: $(VENV)/.installed
	$(BIN)/ragsvc serve

test: $(VENV)/.installed lint-proto
	$(BIN)/python -m pytest

# Regenerates generated/ from protos/ (a test fails when the committed output is stale).
generate: $(VENV)/.installed
	rm -f generated/ragsvc/v1/*_pb2*.py generated/ragsvc/v1/*_pb2*.pyi
	$(BIN)/python -m grpc_tools.protoc -Iprotos --python_out=generated --pyi_out=generated \
		--grpc_python_out=generated $(PROTOS)

lint-proto: $(BUF)
	$(BUF) lint
	$(BUF) format -d --exit-code

format-proto: $(BUF)
	$(BUF) format -w

bench: $(VENV)/.installed
	$(BIN)/python -m bench.run

$(VENV)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@

$(BUF):
	npm install --silent --no-audit --no-fund --prefix .tools @bufbuild/buf@$(BUF_VERSION)

clean:
	rm -rf $(VENV) .tools .pytest_cache
