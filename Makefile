# Two commands on a fresh machine: `make run` and `make test`. Everything else is a convenience.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
# `make run PORT=9000`; DEV_ARGS passes any other `jobsched dev` option (docs/local.md), e.g.
# DEV_ARGS="--moto-port 4566 --dynamodb-port 4567 --no-demo".
PORT ?= 8080
DEV_ARGS ?=
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export PYTHONDONTWRITEBYTECODE := 1

.PHONY: install run test test-fast lint fmt bench bench-time bench-load bench-asset fuzz chaos synth checkov clean clean-cache

$(STAMP): requirements.txt requirements-dev.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --no-compile --disable-pip-version-check uv
	$(VENV)/bin/uv pip install --python $(PY) -q -r requirements-dev.txt -e . \
	  || $(VENV)/bin/pip install -q --no-compile -r requirements-dev.txt -e .
	touch $(STAMP)

install: $(STAMP)

run: install
	$(VENV)/bin/jobsched dev --port $(PORT) $(DEV_ARGS)

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mypy

fmt: install
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

test: install lint
	$(PY) -m pytest

# The inner loop: the suite without the slow end-to-end, synthesis and benchmark tests.
test-fast: install
	$(PY) -m pytest -m "not slow" -q

bench-time: install
	$(PY) -m jobsched.bench.time_core

bench: install bench-time
	$(VENV)/bin/jobsched bench --runs 1000

# The Lambda asset's unzipped size and each function's cold-start import time, bundled boto3 against the
# runtime's copy (docs/performance.md, "Lambda asset and cold start"); ASSET_ARGS="--baseline main" adds
# the asset built from another commit.
ASSET_ARGS ?= --runs 9
bench-asset: install
	$(PY) -m jobsched.bench.asset $(ASSET_ARGS)

# A bounded locust load test of the embedded API on loopback (docs/performance.md, "API under load").
LOAD_ARGS ?= --users 8 --tenants 4 --seconds 45 --requests 300
bench-load: install
	$(PY) -m jobsched.bench.load $(LOAD_ARGS)

# Schemathesis, longer than the run in `make test` (tests/fuzz/test_schemathesis.py): the embedded
# mode on a free port, every check and phase (the coverage phase too, which `make test` leaves out),
# FUZZ_EXAMPLES test cases per operation (decision 0025).
FUZZ_EXAMPLES ?= 100
fuzz: install
	$(PY) -m tests.fuzz.embedded --examples $(FUZZ_EXAMPLES)

# The fault-injection battery (docs/reliability.md): every scenario, the table, exit 1 if a goal is missed.
chaos: install
	$(PY) -W ignore -m jobsched.bench.chaos $(CHAOS_ARGS) 2>/dev/null

synth: install
	$(PY) app.py

# checkov over the template `make synth` writes, offline: no download from Prisma Cloud, no PyPI
# version check (tests/infra/test_checkov.py runs it on both encryption variants in `make test`).
checkov: synth
	CKV_SKIP_PACKAGE_UPDATE_CHECK=TRUE $(VENV)/bin/checkov -f cdk.out/Jobsched.template.json \
	  --framework cloudformation --skip-download --compact

clean:
	rm -rf $(VENV) cdk.out .pytest_cache .ruff_cache .mypy_cache .hypothesis

# The Lambda bundle's cached dependencies (infra/bundling.py): the next synth installs them afresh.
clean-cache:
	rm -rf "$${JOBSCHED_CACHE_DIR:-$${XDG_CACHE_HOME:-$$HOME/.cache}/jobsched}/bundle-deps"
