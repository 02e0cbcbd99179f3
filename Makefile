# kafkasim: `make demo` and `make test` set everything up on a fresh machine.
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

$(STAMP): pyproject.toml setup.py kafkasim/records/_codec.c scripts/ensure_java.sh scripts/ensure_promtool.sh scripts/ensure_chromium.sh scripts/ensure_kcat.sh
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	@$(BIN)/python -c "from kafkasim.records import record_batch as rb; rb.C_CODEC or print('kafkasim: C codec not built (no compiler?); using the pure-Python record codec: same results, slower')"
	bash scripts/ensure_java.sh
	bash scripts/ensure_promtool.sh || echo "kafkasim: promtool missing: the alert-rule tests skip (and fail under CI=true)"
	bash scripts/ensure_chromium.sh || echo "kafkasim: chromium missing: the live-view browser test skips (and fails under CI=true)"
	bash scripts/ensure_kcat.sh || echo "kafkasim: kcat missing: the kcat client tests skip (and fail under CI=true)"
	bash scripts/ensure_fuse.sh || echo "kafkasim: fuse3 missing: the power-cut test skips (and fails under CI=true)"
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
