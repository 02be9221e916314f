# Magnetar: `make run` starts the local cluster, `make test` runs every test. Both install first.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
NODE_STAMP := node_modules/.installed-stamp

.PHONY: install run test lint typecheck unit synth layer bench openapi clean

install: $(STAMP) $(NODE_STAMP)

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

$(NODE_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	@touch $(NODE_STAMP)

run: install
	$(BIN)/magnetar local up

lint: install
	$(BIN)/ruff check .

typecheck: install
	$(BIN)/mypy

test: install lint typecheck
	$(BIN)/python -m pytest

unit: install
	$(BIN)/python -m pytest tests/unit -q

# The layer carries the core and its dependencies (Linux arm64 wheels from PyPI); without the
# package index it falls back to the core alone, which is enough to synthesize.
layer: install
	$(BIN)/python layers/build.py || $(BIN)/python layers/build.py --no-deps

synth: layer
	PATH=$(CURDIR)/$(BIN):$$PATH npx cdk synth --quiet

deploy: layer
	PATH=$(CURDIR)/$(BIN):$$PATH npx cdk deploy

bench: install
	$(BIN)/magnetar perf e2e --duration 20 --json bench/results/perf-e2e-latest.json

# The HTTP API's OpenAPI document, generated from the routes (tests/e2e/test_openapi.py fails when stale)
openapi: install
	$(BIN)/python -m magnetar.api.openapi docs/openapi.json

clean:
	rm -rf $(VENV) node_modules cdk.out layers/core/build .pytest_cache .mypy_cache .ruff_cache
