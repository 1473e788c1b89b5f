"""What each function's cold start imports (issue 31 §4, decision 0056): the wiring imports a service
in the factory that builds it, so a function imports only what its own factory needs. A fresh
interpreter per function, as Lambda's init is; the first event's build included (what it needs is
imported then, never the other functions' services)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from jobsched.bench.asset import READY, function_environment

pytestmark = pytest.mark.slow  # a fresh interpreter per function: seconds each

ROOT = Path(__file__).resolve().parents[2]

#: Modules of other functions' services: the functions on the left import none of them.
WORKER_ONLY = {
    "jobsched.services.worker",
    "jobsched.long_jobs.chunk_runner",
    "jobsched.services.backfills",
    "jobsched.services.limits",
}
NOT_NEEDED = {
    "functions.dispatcher": WORKER_ONLY | {"jobsched.services.sweeper", "jobsched.services.notifications"},
    "functions.sweeper": WORKER_ONLY | {"jobsched.services.dispatcher"},
    "functions.dlq_consumer": WORKER_ONLY
    | {"jobsched.services.dispatcher", "jobsched.services.sweeper", "jobsched.services.notifications"},
}


def _modules_after_ready(module: str) -> set[str]:
    probe = (
        f"import sys, json, {module} as m\n"
        f"m.{READY[module]}\n"
        "print(json.dumps(sorted(k for k in sys.modules if k.startswith(('jobsched', 'functions')))))"
    )
    env = {**function_environment(), "PYTHONPATH": str(ROOT), "PATH": os.environ.get("PATH", "")}
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return set(json.loads(done.stdout.splitlines()[-1]))


@pytest.mark.parametrize("module", sorted(NOT_NEEDED))
def test_a_function_imports_none_of_the_other_functions_services(module):
    loaded = _modules_after_ready(module)
    assert module in loaded
    assert loaded & NOT_NEEDED[module] == set()


def test_the_worker_still_imports_all_it_builds_on_its_first_event():
    # the control: the worker's own build imports what the others leave out
    assert _modules_after_ready("functions.worker") >= WORKER_ONLY
