# kafkasim: `make demo` and `make test` set everything up on a fresh machine.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

.PHONY: setup demo test test-fast bench clean

$(STAMP): pyproject.toml setup.py storage/_codec.c scripts/ensure_java.sh
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	bash scripts/ensure_java.sh
	touch $(STAMP)

setup: $(STAMP)

demo: setup
	$(BIN)/kafkasim demo

test: setup
	$(BIN)/python -m pytest

test-fast: setup
	$(BIN)/python -m pytest -m "not slow"

bench: setup
	$(BIN)/pip install --quiet -e '.[bench]'
	$(BIN)/python -m benchmarks

clean:
	rm -rf $(VENV) kafkasim-data bench-results.json .pytest_cache build storage/_codec*.so
