"""The garbage collector's settings of the embedded mode's processes (jobsched/local/collector.py),
checked in a fresh interpreter: the test process's own collector is settled by tests/conftest.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from jobsched.local import collector
from jobsched.local.container import _CHILD as CONTAINER_CHILD
from jobsched.local.embedded import MotoProcess

ROOT = Path(__file__).resolve().parents[2]

PROGRAM = """
import gc, json
from jobsched.local import collector
before = gc.get_threshold()
collector.quiet()
quiet = gc.isenabled()
kept = [[i] for i in range(5000)]  # alive at the settle: frozen
frozen = collector.settle()
cycle = [None]
cycle[0] = cycle  # garbage made after the settle: still collected
del cycle
found = gc.collect()
seen = {"before": before, "quiet": quiet, "enabled": gc.isenabled(), "thresholds": gc.get_threshold()}
print(json.dumps({**seen, "frozen": frozen, "found": found}))
"""


def _fresh(program: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", program], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_quiet_then_settle_freezes_what_is_alive_and_sets_the_thresholds_and_later_garbage_is_collected() -> (
    None
):
    # Given a fresh interpreter (CPython's defaults), when it quiets the collector, makes 5,000 lists,
    # settles, then drops a cycle
    seen = _fresh(PROGRAM)
    # Then the collector was off until the settle, and on after it with the embedded mode's thresholds
    assert tuple(seen["before"]) == (700, 10, 10)
    assert seen["quiet"] is False
    assert seen["enabled"] is True
    assert tuple(seen["thresholds"]) == collector.THRESHOLDS == (50_000, 20, 10)
    # And everything alive at the settle is frozen (the lists, the modules...)
    assert seen["frozen"] > 5000
    # And the cycle made after it is garbage the next collection finds
    assert seen["found"] >= 1


def test_the_emulators_and_the_container_workers_programs_settle_after_their_imports() -> None:
    # Given the programs the embedded mode runs as its moto servers and its container worker
    for program, last_import in (
        (MotoProcess.CHILD_PROGRAM, "from moto.server import main"),
        (CONTAINER_CHILD, "from jobsched.cli.main import main"),
    ):
        lines = [line.strip() for line in program.strip().splitlines()]
        # Then each quiets the collector before its heavy imports and settles it right after them
        assert lines.index("collector.quiet()") < lines.index(last_import) < lines.index("collector.settle()")
        assert lines.index("collector.settle()") == lines.index(last_import) + 1
