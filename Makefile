# kafkasim: `make demo` and `make test` set everything up on a fresh machine.
# A real component the tests need (promtool, Chromium, kcat) that cannot be installed stops the set-up
# with its install command (scripts/missing_component.sh), unless KAFKASIM_SKIP_MISSING=1 skips its tests.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
# Apps with their own virtualenvs (tests/server/test_apps.py runs them against kafkasim serve):
# each pins a client range apart from the project's (quixstreams: confluent-kafka<2.13; faust:
# its aiokafka), so each gets .venv-apps/NAME from tests/apps/requirements-NAME.txt.
APPS       := faust quix
APP_STAMPS := $(foreach app,$(APPS),.venv-apps/$(app)/.installed-stamp)

.PHONY: setup demo test test-fast bench clean

$(STAMP): pyproject.toml setup.py kafkasim/records/_codec.c scripts/ensure_java.sh scripts/ensure_promtool.sh scripts/ensure_chromium.sh scripts/ensure_kcat.sh scripts/ensure_fuse.sh scripts/missing_component.sh
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	@$(BIN)/python -c "from kafkasim.records import record_batch as rb; rb.C_CODEC or print('kafkasim: C codec not built (no compiler?); using the pure-Python record codec: same results, slower')"
	bash scripts/ensure_java.sh
	bash scripts/ensure_promtool.sh
	bash scripts/ensure_chromium.sh
	bash scripts/ensure_kcat.sh
	bash scripts/ensure_fuse.sh
	touch $(STAMP)

.venv-apps/%/.installed-stamp: tests/apps/requirements-%.txt
	rm -rf .venv-apps/$*
	$(PYTHON) -m venv .venv-apps/$*
	.venv-apps/$*/bin/pip install --quiet --upgrade pip
	.venv-apps/$*/bin/pip install --quiet -r $<
	touch $@

setup: $(STAMP) $(APP_STAMPS)

demo: setup
	$(BIN)/kafkasim demo

test: setup
	$(BIN)/python scripts/lint_imports.py
	$(BIN)/python -m pytest

test-fast: setup
	$(BIN)/python -m pytest -m "not slow"

bench: setup
	$(BIN)/pip install --quiet -e '.[bench]'
	$(BIN)/python -m benchmarks

clean:
	rm -rf $(VENV) .venv-apps kafkasim-data bench-results.json .pytest_cache build kafkasim/records/_codec*.so
