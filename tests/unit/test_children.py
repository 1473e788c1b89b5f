"""tests/children.py: a child the tests start ends with the test process, however that ends."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from jobsched.local.embedded import process_alive as alive
from tests.children import die_with_parent

ROOT = Path(__file__).resolve().parents[2]

#: A child that writes which signal ended it to the file it is given, then exits.
CHILD = """
import signal, sys, time
def ended(sig, frame):
    open(sys.argv[1], "w").write(signal.Signals(sig).name)
    sys.exit(0)
signal.signal(signal.SIGTERM, ended)
print("ready", flush=True)
time.sleep(60)
"""

#: A parent (the test process's stand-in) that starts CHILD with die_with_parent, prints its pid and
#: waits to be killed.
PARENT = """
import subprocess, sys, time
from tests.children import die_with_parent
child = subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2]], stdout=subprocess.PIPE,
                         text=True, preexec_fn=die_with_parent())
child.stdout.readline()
print(child.pid, flush=True)
time.sleep(60)
"""

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux's")


def test_a_child_gets_sigterm_when_its_parent_is_killed(tmp_path: Path) -> None:
    """Given a process that started a child with die_with_parent()
    When that process is killed with SIGKILL (no teardown runs)
    Then the child is sent SIGTERM (its graceful stop) and ends."""
    record = tmp_path / "signal"
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, CHILD, str(record)], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    assert alive(child)
    parent.kill()
    parent.wait(10)
    deadline = time.monotonic() + 10
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(child)
    assert record.read_text() == "SIGTERM"


def test_without_it_the_child_outlives_its_killed_parent(tmp_path: Path) -> None:
    """Given the same parent starting its child with no preexec_fn (as the tests did), When it is
    killed, Then the child lives on (what the helper is for), until this test ends it."""
    parent_program = PARENT.replace("preexec_fn=die_with_parent()", "preexec_fn=None")
    parent = subprocess.Popen(
        [sys.executable, "-c", parent_program, CHILD, str(tmp_path / "signal")],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    parent.kill()
    parent.wait(10)
    try:
        time.sleep(0.5)
        assert alive(child)
    finally:
        os.kill(child, signal.SIGKILL)


def test_from_a_thread_other_than_the_main_one_nothing_is_asked_for() -> None:
    """Given a thread that may end while its child should live, Then no preexec_fn is given."""
    found: list[object] = []
    thread = threading.Thread(target=lambda: found.append(die_with_parent()))
    thread.start()
    thread.join()
    assert found == [None]
    assert callable(die_with_parent())


def test_a_process_that_ended_is_not_alive_while_it_waits_to_be_reaped() -> None:
    """Given a child that has exited but is not reaped yet (a zombie: an orphan waits so for PID 1,
    which on the development machine reaps about 1.7 s late, and later under load), Then it is not
    alive; os.kill(pid, 0) alone still finds it."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        deadline = time.monotonic() + 30
        while (
            Path(f"/proc/{child.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
            and time.monotonic() < deadline
        ):
            time.sleep(0.02)  # fmt: skip
        os.kill(child.pid, 0)  # the zombie is still found this way
        assert not alive(child.pid)
    finally:
        child.wait()
    assert not alive(child.pid)
