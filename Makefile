# Magnetar: `make run` starts the local cluster, `make test` runs every test. Both install first.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
NODE_STAMP := node_modules/.installed-stamp

.PHONY: install run test lint typecheck unit synth layer bench bench-report openapi proto clean docs docs-serve browser console-vendor screenshots

install: $(STAMP) $(NODE_STAMP) browser

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	$(BIN)/python scripts/spark_path.py
	@touch $(STAMP)

$(NODE_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	@touch $(NODE_STAMP)

# Headless Chromium for the console's browser tests (tests/e2e/test_console.py) and screenshots: Debian's
# package, installed when no Chromium is on the PATH (as root, else with sudo). Playwright drives it and
# downloads no browser of its own.
browser:
	@if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then :; \
	elif ! command -v apt-get >/dev/null 2>&1; then echo "no Chromium: install one for the console's browser tests"; \
	elif [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; \
	else sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; fi

# The console's vendored libraries (console/vendor) from the npm packages package.json pins
console-vendor: $(NODE_STAMP)
	$(BIN)/python scripts/console_vendor.py

# The console's screenshots in docs/img (a local cluster of their own, some traffic, headless Chromium)
screenshots: install
	$(BIN)/python scripts/console_screenshots.py

run: install
	$(BIN)/magnetar local up

lint: install
	$(BIN)/ruff check .

typecheck: install
	$(BIN)/mypy

# Three workers (pytest-xdist), a test file each at a time, each worker with its own session cluster:
# the tests mostly wait (seals, long polls, pushes; an idle cluster reads its shards once a second), so
# three share the 2 cores well (about 60-70 % busy). The longest files start first (tests/scheduling.py,
# from the seconds in tests/durations.json). PYTEST_WORKERS=0: one process.
PYTEST_WORKERS ?= 3
test: install lint typecheck
	$(BIN)/python -m pytest $(if $(filter 0,$(PYTEST_WORKERS)),,-n $(PYTEST_WORKERS) --dist loadfile)

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

# docs/benchmarks.md's tables, generated again from the results in bench/results/, and docs/cost-model.md's
# from the cost model (the prose around them is left alone; tests/unit/test_bench_report.py and
# tests/unit/test_cost_report.py fail when a document is stale)
bench-report: install
	$(BIN)/python bench/report.py --unused

# The binary protocol's Python module, generated from Magnetar's own .proto (protoc from grpcio-tools)
proto: install
	cd src && ../$(BIN)/python -m grpc_tools.protoc -I. --python_out=. magnetar/protocol/pulsar_api.proto

# The HTTP API's OpenAPI document, generated from the routes (tests/e2e/test_openapi.py fails when stale)
openapi: install
	$(BIN)/python -m magnetar.api.openapi docs/openapi.json

# The suite against LocalStack (S3, Kinesis) and DynamoDB Local instead of moto: scripts/emulators.sh starts
# them unless they already run (LocalStack in host mode from its Python package, which needs Python >= 3.12:
# pyenv's, or LS_PYTHON=...; DynamoDB Local from the npm package, on Java), sets AWS_ENDPOINT_URL and
# AWS_ENDPOINT_URL_DYNAMODB, and stops what it started. Two pytest workers, each worker's cluster on a table,
# bucket and stream of its own (tests/conftest.py); ~18 min here. PYTEST_ARGS narrows it.
PYENV_ROOT ?= $(HOME)/.pyenv
LS_PYTHON  ?= $(or $(lastword $(sort $(wildcard $(PYENV_ROOT)/versions/3.13*/bin/python3.13))),$(lastword $(sort $(wildcard $(PYENV_ROOT)/versions/3.12*/bin/python3.12))),$(shell command -v python3.13 || command -v python3.12))
LS_VENV    := .venv-localstack
LS_STAMP   := $(LS_VENV)/.installed-stamp
PYTEST_ARGS ?= -n 2 --dist loadfile --timeout=600
# Tests known to fail on LocalStack only, deselected there (none today; see docs/benchmarks.md)
LOCALSTACK_KNOWN_FAILURES ?=

.PHONY: localstack-install test-localstack

localstack-install: $(LS_STAMP)

$(LS_STAMP): scripts/localstack-requirements.txt
	@test -n "$(LS_PYTHON)" || { echo "LocalStack needs Python >= 3.12: pyenv install 3.13, or make LS_PYTHON=..."; exit 1; }
	@test -x $(LS_VENV)/bin/python || $(LS_PYTHON) -m venv $(LS_VENV)
	$(LS_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(LS_VENV)/bin/python -m pip install --quiet -r scripts/localstack-requirements.txt
	@touch $(LS_STAMP)

test-localstack: install $(LS_STAMP)
	scripts/emulators.sh $(BIN)/python -m pytest $(PYTEST_ARGS) $(addprefix --deselect ,$(LOCALSTACK_KNOWN_FAILURES))

clean:
	rm -rf $(VENV) node_modules cdk.out layers/core/build .pytest_cache .mypy_cache .ruff_cache

# The documentation site (mkdocs-material; the SDK reference from the docstrings): site/, strict
docs: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

docs-serve: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve
