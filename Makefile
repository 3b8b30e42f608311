# `make demo` and `make test` each set up everything they need first (idempotent, quick when done).
SHELL := /bin/bash
VENV ?= .venv
BIN := $(VENV)/bin
export KEDRO_DISABLE_TELEMETRY := 1
export DVC_NO_ANALYTICS := 1
export PATH := $(CURDIR)/$(BIN):$(PATH)

.PHONY: setup demo repro test test-all lint format bench docs docs-build clean-demo

setup:
	bash .ci/setup.sh

# Every stage's code fingerprint first (conf/stage_code/): DVC sees a code edit only through it.
demo: setup
	@test -d .dvc || $(BIN)/dvc init -q
	$(BIN)/python -m asr_pipeline.stage_deps --write
	time $(BIN)/dvc repro
	@$(BIN)/python -m asr_pipeline.decoding.results

repro:  # what is stale, after rewriting the code fingerprints (`make repro STAGE=features` for one stage)
	$(BIN)/python -m asr_pipeline.stage_deps --write
	$(BIN)/dvc repro $(STAGE)

# Two pytest-xdist workers (each torch on one thread: tests/conftest.py); `make test TEST_WORKERS=0` runs in one process.
# --dist loadfile: a test file's tests share one worker, so a module fixture (test_dvc_pipeline's whole repro)
# is built once (xdist's loadgroup no longer groups under pytest 9.2: pytest-xdist issue 1386).
TEST_WORKERS ?= 2

test: setup
	$(BIN)/pytest -n $(TEST_WORKERS) --dist loadfile -m "not slow" -q --durations=30  # the slowest tests, in the CI log too

test-all: setup
	$(BIN)/pytest -n $(TEST_WORKERS) --dist loadfile -q --durations=30

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: setup
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

docs: setup  # the docs site on http://127.0.0.1:8000, rebuilt on every edit
	$(BIN)/mkdocs serve

docs-build: setup  # the docs site into site/; a broken link or anchor fails it
	$(BIN)/mkdocs build --strict

bench: setup
	@for script in benchmarks/bench_*.py; do echo "== $$script"; $(BIN)/python $$script || exit 1; done
