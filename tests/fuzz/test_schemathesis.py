"""Schemathesis against the embedded mode, in ``make test`` (issue 16 §2, decision 0025).

The real embedded mode (``jobsched dev``'s code, in a child process, on an ephemeral port) serves
``/openapi.json``; schemathesis runs every check in the examples, fuzzing and stateful phases (the
stateful one follows the document's links job -> runs -> run -> dead letter and workflow ->
workflow runs) with the hooks and settings of ``tests/fuzz/`` and a fixed seed, so CI replays the
same cases. A clean run is the assertion: exit status 0, no failure, no error.

``make fuzz`` runs every phase with 100 test cases per operation (this one: 10) and prints the
report. The coverage phase is left out here: it sends every case the document defines (about 6000,
whatever the number of examples), 45 s on an idle 2-core machine and over 4 minutes on a busy one,
beyond this test's budget (decision 0025).
"""

from __future__ import annotations

import re

import pytest

from tests.fuzz.embedded import TOKEN
from tests.fuzz.run import ALL_PHASES, run
from tests.local.e2e_helpers import EmbeddedProcess

pytestmark = pytest.mark.slow(seconds=40)

#: Test cases per operation in the fuzzing and stateful phases.
EXAMPLES = 10
PHASES = ",".join(p for p in ALL_PHASES.split(",") if p != "coverage")
#: A fixed seed: the same cases in every CI run.
SEED = 16
#: Seconds the schemathesis process may take.
TIMEOUT = 270


def test_schemathesis_finds_nothing():
    """Given the embedded mode with tenant ``fuzz`` (an administrator, so /admin routes are reached)
    When schemathesis runs every check, in the examples, fuzzing and stateful phases
    Then it reports no failure and no error, and every phase ran."""
    process = EmbeddedProcess({"fuzz": TOKEN}, admins=["fuzz"])
    try:
        url = process.wait_ready()
        result = run(url, TOKEN, examples=EXAMPLES, seed=SEED, timeout=TIMEOUT, phases=PHASES)
    finally:
        process.stop()
    report = result.stdout + result.stderr
    assert result.returncode == 0, report[-20000:]
    phases = report.split("Test Phases:")[-1]
    # the document carries no examples, so the examples phase is skipped; the others must pass
    for phase, mark in (("Examples", "(✅|⏭)"), ("Fuzzing", "✅"), ("Stateful", "✅")):
        assert re.search(rf"{mark} +{phase}", phases), f"{phase} did not pass:\n{report[-5000:]}"
    assert not re.search(r"\b\d+ (failures?|errors?)\b", report.split("SUMMARY")[-1]), report[-5000:]
