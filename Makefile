# Two commands on a fresh machine: `make run` and `make test`. Everything else is a convenience.
SHELL := /bin/bash
# The interpreter .venv is made from (decision 0044, twentieth pass): the system's /usr/bin/python3 when
# it is 3.11 or later (a distribution's build, compiled with profile-guided and link-time optimisation),
# else python3 on PATH. On this machine python3 on PATH is pyenv's 3.11.7, built without either: the cost
# benchmark's pipeline took up to 30 % more CPU on it, a clean-clone `make test` 12-18 % more.
# `make PYTHON=python3.12 install` makes .venv from another;
# an existing .venv is kept whatever it was made from (`make clean` removes it).
PYTHON ?= $(shell for p in /usr/bin/python3 python3; do "$$p" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
  2>/dev/null && { echo "$$p"; break; }; done)
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
# `make run PORT=9000`; DEV_ARGS passes any other `jobsched dev` option (docs/local.md), e.g.
# DEV_ARGS="--moto-port 4566 --dynamodb-port 4567 --no-demo".
PORT ?= 8080
DEV_ARGS ?=
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
# Python writes bytecode (__pycache__, git-ignored; the Lambda asset leaves it out) even where the
# environment says not to: without it every test process and child process (xdist workers, the
# embedded mode, `jobsched dev`, moto's server) compiled every module it imported, each time — 20.7 s
# of CPU to collect the suite instead of 6.3 s (decision 0044).
unexport PYTHONDONTWRITEBYTECODE

.PHONY: install run test test-fast lint fmt bench bench-time bench-load bench-asset fuzz chaos synth checkov deploy-rehearsal clean clean-cache iam-report

$(STAMP): requirements.txt requirements-dev.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV) \
	  || { echo "make: $(PYTHON) -m venv failed: making $(VENV) from python3" >&2; rm -rf $(VENV); python3 -m venv $(VENV); }
	$(VENV)/bin/pip install -q --no-compile --disable-pip-version-check uv
	$(VENV)/bin/uv pip install --python $(PY) -q -r requirements-dev.txt -e . \
	  || $(VENV)/bin/pip install -q --no-compile -r requirements-dev.txt -e .
	touch $(STAMP)

install: $(STAMP)

run: install
	$(VENV)/bin/jobsched dev --port $(PORT) $(DEV_ARGS)

LINT_COMMANDS := $(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check . && $(VENV)/bin/lint-imports \
  && $(VENV)/bin/mypy
lint: install
	$(LINT_COMMANDS)

fmt: install
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

# The suite on TEST_WORKERS pytest-xdist workers (decision 0044): tests that share a fixture wider than
# a function (a synthesized app, a running `jobsched dev`) stay on one worker (tests/conftest.py);
# BESIDE_TESTS are left out of it. Before it, one collection of the same tests in this process, so that
# the workers start on compiled bytecode and rewritten test modules instead of each compiling them
# (twenty-third pass). Beside it, under `nice -n 19` (they take the CPU the workers leave idle while
# they wait on child processes and real time): `make lint`'s commands, whose output is printed when the
# parallel run ends (a lint failure fails `make test` there, decision 0044, seventh pass), and
# BESIDE_TESTS, CPU-bound tests with no real-time assertion (the synthesized stack's), in one process of
# their own, which goes on beside the serial tests (twentieth pass; its output is printed when they end,
# and a failure fails `make test` there; if the parallel run or lint fails, it is stopped). Then the
# tests marked serial (real-time assertions a busy CPU breaks; only their files are collected,
# tests/serial.py), in three processes side by side: the first and third lanes, whose tests start
# embedded modes and `jobsched dev`s and wait on real time (the third has the fair poller's held
# visibility too; THIRD_LANE in tests/serial.py, output in THIRD_LANE_LOG), and the second
# (SECOND_LANE, output in SECOND_LANE_LOG), whose tests run in-process (the others' output is printed
# when the first ends; twenty-first to twenty-third passes); with the
# deploy rehearsal beside them under `nice -n 19` (about one core for a minute), without IAM_CALLS_DIR
# (its calls are not the tests'), its output printed when they end and a failure failing `make test`
# there (beside the parallel run instead, tried in the twenty-third pass, it saved nothing). Last,
# alone, the permissions check, which judges every call the whole run recorded into the same
# IAM_CALLS_DIR (decision 0044, ninth pass). The rehearsal is started directly: `$(MAKE)
# deploy-rehearsal` would re-check `install` in a sub-make that `make -o .venv/.installed-stamp` does
# not reach (make passes no -o down), and reinstall a shared .venv.
TEST_WORKERS ?= 4
# --no-loadscope-reorder: the work units go out in the order the workers collected them, the longest
# first (tests/conftest.py); pytest-xdist's default re-sorts them by their number of tests, which had
# a one-test unit of 100 s start two minutes in (decision 0044, twenty-first pass).
PYTEST_PARALLEL := -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder
LINT_LOG := $(VENV)/lint-beside-tests.log
REHEARSAL_LOG := $(VENV)/rehearsal-beside-tests.log
BESIDE_TESTS := tests/infra
BESIDE_LOG := $(VENV)/tests-beside-serial.log
SECOND_LANE_LOG := $(VENV)/serial-second-lane.log
THIRD_LANE_LOG := $(VENV)/serial-third-lane.log
test: install
	nice -n 19 bash -c '$(LINT_COMMANDS)' > $(LINT_LOG) 2>&1 & lint=$$!; \
	  export IAM_CALLS_DIR="$(CURDIR)/.iam-calls/pytest/$$(date +%s%N)-$$$$"; \
	  nice -n 19 $(PY) -m pytest -p no:cacheprovider -q -m "not serial" $(BESIDE_TESTS) > $(BESIDE_LOG) 2>&1 & beside=$$!; \
	  $(PY) -m pytest -p no:cacheprovider -q --collect-only -m "not serial" $(addprefix --ignore=,$(BESIDE_TESTS)) \
	    > /dev/null 2>&1; \
	  $(PY) -m pytest $(PYTEST_PARALLEL) -m "not serial" $(addprefix --ignore=,$(BESIDE_TESTS)); tests=$$?; \
	  wait $$lint; linted=$$?; echo "--- make lint (beside the parallel run):"; cat $(LINT_LOG); \
	  if [ $$linted -ne 0 ] || [ $$tests -ne 0 ]; then kill $$beside 2>/dev/null; wait $$beside; \
	    echo "make test: $(BESIDE_TESTS) stopped (the parallel run or lint failed)"; fi; \
	  if [ $$linted -ne 0 ]; then echo "make test: make lint failed (above)"; exit $$linted; fi; \
	  if [ $$tests -ne 0 ]; then exit $$tests; fi; \
	  env -u IAM_CALLS_DIR nice -n 19 $(PY) -m jobsched.rehearsal > $(REHEARSAL_LOG) 2>&1 & rehearsal=$$!; \
	  $(PY) -m pytest -p no:cacheprovider -m serial $$($(PY) -m tests.serial --lane 2) > $(SECOND_LANE_LOG) 2>&1 & \
	  second=$$!; \
	  $(PY) -m pytest -p no:cacheprovider -m serial $$($(PY) -m tests.serial --lane 3) > $(THIRD_LANE_LOG) 2>&1 & \
	  third=$$!; \
	  $(PY) -m pytest -m serial $$($(PY) -m tests.serial --lane 1); serial=$$?; \
	  wait $$second; seconds=$$?; echo "--- the serial tests' second lane (beside the first):"; \
	  cat $(SECOND_LANE_LOG); \
	  wait $$third; thirds=$$?; echo "--- the serial tests' third lane (beside the first):"; \
	  cat $(THIRD_LANE_LOG); \
	  wait $$beside; besides=$$?; echo "--- $(BESIDE_TESTS) (beside the parallel run and the serial tests):"; \
	  cat $(BESIDE_LOG); \
	  wait $$rehearsal; rehearsed=$$?; echo "--- make deploy-rehearsal (beside the serial tests):"; \
	  cat $(REHEARSAL_LOG); \
	  if [ $$seconds -ne 0 ]; then echo "make test: the serial tests' second lane failed (above)"; fi; \
	  if [ $$thirds -ne 0 ]; then echo "make test: the serial tests' third lane failed (above)"; fi; \
	  if [ $$besides -ne 0 ]; then echo "make test: $(BESIDE_TESTS) failed (above)"; fi; \
	  if [ $$rehearsed -ne 0 ]; then echo "make test: the deploy rehearsal failed (above)"; fi; \
	  [ $$serial -eq 0 ] && [ $$seconds -eq 0 ] && [ $$thirds -eq 0 ] && [ $$besides -eq 0 ] && \
	  [ $$rehearsed -eq 0 ] && \
	  $(PY) -m pytest -m serial $$($(PY) -m tests.serial --last)

# The inner loop (decision 0044), chosen by directory: the tests that need no emulator server, no embedded
# mode, no CDK synthesis and no browser — the core (tests/unit), the fakes and their contract with moto
# in-process (tests/testing, tests/contract), the services and long jobs (tests/services, tests/long_jobs)
# and the HTTP API (tests/api) on the in-memory fakes. Only these directories are collected, so no worker
# imports aws_cdk, Playwright or schemathesis; their `serial` tests run after, in one process, as in
# `make test`, which runs them and every other test.
FAST_TESTS := tests/unit tests/testing tests/contract tests/services tests/long_jobs tests/api
FAST_WORKERS ?= 2
test-fast: install
	$(PY) -m pytest -n $(FAST_WORKERS) --dist loadgroup -m "not slow and not serial" -q $(FAST_TESTS) && \
	  $(PY) -m pytest -m "serial and not slow" -q $(FAST_TESTS)

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
# FUZZ_EXAMPLES test cases per operation (decision 0025). `make fuzz SEED=N` replays a run; without
# SEED a random seed is drawn and printed first (decision 0036).
FUZZ_EXAMPLES ?= 100
SEED ?=
fuzz: install
	$(PY) -m tests.fuzz.embedded --examples $(FUZZ_EXAMPLES) $(if $(SEED),--seed $(SEED))

# The fault-injection battery (docs/reliability.md): every scenario, the table, exit 1 if a goal is missed.
chaos: install
	$(PY) -W ignore -m jobsched.bench.chaos $(CHAOS_ARGS) 2>/dev/null

synth: install
	$(PY) app.py

# Permissions proved by use (docs/deploy.md, decision 0038): the fault battery and a benchmark run with
# every function's AWS calls recorded (each `make test` leaves its recording in .iam-calls/pytest/<session>),
# both encryption variants are synthesized, and each call is checked against its function's role; the
# report lists every grant no call used with its disposition. Exit 1 on a denied or unattributed call
# or an unjustified grant.
IAM_CALLS ?= .iam-calls
# The cost benchmark, small (the full `make bench` takes most of an hour on a loaded 2-core machine).
IAM_BENCH_ARGS ?= --runs 200 --jobs 20 --no-lag
IAM_CONTEXT := {"notify_topic_arns": "arn:aws:sns:us-east-1:123456789012:team-*"}
iam-report: install
	rm -rf $(IAM_CALLS)/runs $(IAM_CALLS)/cdk.out.aws $(IAM_CALLS)/cdk.out.cmk
	-$(PY) -W ignore -m jobsched.local.iam.record $(IAM_CALLS)/runs jobsched.bench.chaos $(CHAOS_ARGS) 2>/dev/null | tail -3
	-$(PY) -m jobsched.local.iam.record $(IAM_CALLS)/runs jobsched.cli bench $(IAM_BENCH_ARGS) | tail -3
	CDK_OUTDIR=$(IAM_CALLS)/cdk.out.aws CDK_CONTEXT_JSON='$(IAM_CONTEXT)' $(PY) app.py > /dev/null
	CDK_OUTDIR=$(IAM_CALLS)/cdk.out.cmk CDK_CONTEXT_JSON='{"encryption": "cmk", $(patsubst {%,%,$(IAM_CONTEXT))' \
	  $(PY) app.py > /dev/null
	$(PY) -m jobsched.local.iam.report --calls "$$(ls -td $(IAM_CALLS)/pytest/*/ 2>/dev/null | head -1)" \
	  --calls $(IAM_CALLS)/runs \
	  --template aws=$(IAM_CALLS)/cdk.out.aws/Jobsched.template.json \
	  --template cmk=$(IAM_CALLS)/cdk.out.cmk/Jobsched.template.json

# checkov over the template `make synth` writes, offline: no download from Prisma Cloud, no PyPI
# version check (tests/infra/test_checkov.py runs it on both encryption variants in `make test`).
checkov: synth
	CKV_SKIP_PACKAGE_UPDATE_CHECK=TRUE $(VENV)/bin/checkov -f cdk.out/Jobsched.template.json \
	  --framework cloudformation --skip-download --compact

# The first-deploy checklist of docs/deploy.md with the real CDK CLI (pinned in package.json, `npm ci`
# into ./node_modules) against an emulated account on loopback: bootstrap, deploy, checks of what was
# deployed, an update, the quickstart on the deployed stack, destroy (docs/decisions/0037). Needs npm.
deploy-rehearsal: install
	$(PY) -m jobsched.rehearsal

clean:
	rm -rf $(VENV) node_modules cdk.out .pytest_cache .ruff_cache .mypy_cache .hypothesis

# The Lambda bundle's cached dependencies (infra/bundling.py): the next synth installs them afresh.
clean-cache:
	rm -rf "$${JOBSCHED_CACHE_DIR:-$${XDG_CACHE_HOME:-$$HOME/.cache}/jobsched}/bundle-deps"
