"""The tests ``make test`` runs after the parallel run, in three lanes (decision 0044), and their files.

:data:`SERIAL` names whole files (tests/conftest.py marks their tests ``serial``); a test elsewhere is
marked in its file (``@pytest.mark.serial``). ``python -m tests.serial`` prints every file that holds a
serial test, one per line (``--before-last``: all but the permissions check's; ``--last``: only that
one, which ``make test`` runs alone after the serial tests and the tests beside them; ``--lane 1``,
``--lane 2`` and ``--lane 3``: the three processes ``make test`` runs side by side, :data:`SECOND_LANE`
and :data:`THIRD_LANE`): the serial
sessions collect only those, not the whole suite again (one collection imports aws_cdk, Playwright,
schemathesis and hypothesis: 20-40 s on this machine). The
parallel session checks that every test it sees marked ``serial`` is in one of them
(:func:`tests.conftest.pytest_collection_modifyitems`), so a test cannot be left out of both parts.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: The permissions check: it judges what every other test recorded, so it runs after them.
LAST = "test_permissions_by_use.py"
#: Tests whose assertions hold only while their processes get the CPU on time (per-second jobs paused
#: and resumed in real time; a cost comparison of two runs timed on the wall clock). Beside two other
#: xdist workers on two cores they failed (decision 0044), so ``make test`` runs them after the
#: parallel run, in two lanes of one process each, then the permissions check: marked ``serial``.
SERIAL = frozenset(
    {
        "tests/local/test_e2e_pause.py",
        "tests/local/test_e2e_resume.py",
        "tests/local/test_e2e_priority.py",  # a high run on time while low and default are flooded
        # A 3 s run every second with overlap skip: an occurrence is skipped only if the dispatcher
        # decides it while the run is active; a tick late by seconds (load 10, 2026-12-05) let one run.
        "tests/local/test_e2e_overlap.py",
        "tests/local/test_dev_command.py",  # jobsched dev's banner within 30 s
        "tests/infra/test_asl_moto.py",  # moto's real-time Step Functions interpreter and heartbeats
        "tests/bench/test_pipeline.py",
        # Unmetered calls (goal_met false, requests equal) on a worker that had run other tests before:
        # it counts every call in its process; suspected a thread an earlier test left running.
        "tests/bench/test_idle.py",
        # The same, seen once on a clean clone (2026-12-05): 2 unmetered sqs.SendMessage each for the
        # dispatcher and the worker, on a worker that had run other tests; it passed on the run before.
        "tests/bench/test_burst.py",
        # Five runs of ~1.2 s in real threads with a 0.2 s cancel watch, counting the reads: in the inner
        # loop (make test-fast, two workers on two cores) it failed 2 runs in 6, alone it passes.
        "tests/services/test_worker_cancel.py",
        f"tests/infra/{LAST}",
    }
)
#: The serial files ``make test`` runs in a second process beside the first (decision 0044, thirteenth
#: pass): tests that start no embedded mode, ``jobsched dev`` or other child process of their own --
#: moto in-process with real sleeps (the state machine's heartbeats), threads timed in-process (the
#: cancel watch) and the benchmarks, which pin themselves to one CPU. The other serial files (the
#: end-to-end embedded modes and ``jobsched dev``'s start and stop, whose child processes need the CPU
#: on time) are in the first and third processes. ``--lane 1``, ``--lane 2`` and ``--lane 3`` print
#: the three; the permissions check is in none.
SECOND_LANE = frozenset(
    {
        "tests/bench/test_burst.py",
        "tests/bench/test_idle.py",
        "tests/bench/test_pipeline.py",
        "tests/infra/test_asl_moto.py",
        "tests/services/test_worker_cancel.py",
    }
)
#: The serial files ``make test`` runs in a third process beside the other two (decision 0044,
#: twenty-first and twenty-second passes): half of the first lane's real-time wait (``jobsched dev``'s
#: starts and stops, the overlap and priority modules, the poller's gathering), which alone took 96 s of
#: wall for about 50 s of CPU and ended the serial part with one core idle; and, from the twenty-third
#: pass, the fair poller's held visibility (moto in-process, 14 s of mostly waiting), which made the
#: second lane the last to end by about 20 s. The first lane runs every other serial file.
THIRD_LANE = frozenset(
    {
        "tests/aws/test_fair_poller.py",
        "tests/local/test_dev_command.py",
        "tests/local/test_e2e_overlap.py",
        "tests/local/test_e2e_priority.py",
        "tests/local/test_pollers.py",
    }
)
#: How a test file marks a test of its own serial (``@pytest.mark.serial``, ``pytestmark = ...``).
MARK = "mark.serial"


def serial_files(root: Path = ROOT) -> list[str]:
    """Every test file with a serial test, relative to ``root``: :data:`SERIAL` and each file under
    tests/ whose text marks one."""
    marked = {
        str(path.relative_to(root))
        for path in (root / "tests").rglob("test_*.py")
        if MARK in path.read_text(encoding="utf-8")
    }
    return sorted(SERIAL | marked)


def main(argv: list[str], root: Path = ROOT) -> str:
    """What ``python -m tests.serial [--before-last | --last | --lane 1 | --lane 2 | --lane 3]`` prints:
    every serial file; with ``--before-last``, all but the permissions check's; with ``--last``, only
    the permissions check's (``make test`` runs it alone once the serial tests and the tests beside
    them have recorded); with ``--lane 2``, the files of :data:`SECOND_LANE`; with ``--lane 3``, those
    of :data:`THIRD_LANE`; with ``--lane 1``, all the others but the permissions check's."""
    files = serial_files(root)
    last = next(name for name in files if Path(name).name == LAST)
    if argv == ["--before-last"]:
        files = [name for name in files if name != last]
    elif argv == ["--last"]:
        files = [last]
    elif argv == ["--lane", "1"]:
        files = [name for name in files if name != last and name not in SECOND_LANE | THIRD_LANE]
    elif argv == ["--lane", "2"]:
        files = [name for name in files if name in SECOND_LANE]
    elif argv == ["--lane", "3"]:
        files = [name for name in files if name in THIRD_LANE]
    elif argv:
        raise SystemExit(
            "usage: python -m tests.serial [--before-last | --last | --lane 1 | --lane 2 | --lane 3], "
            f"not {' '.join(argv)}"
        )
    return "\n".join(files)


if __name__ == "__main__":
    print(main(sys.argv[1:]))
