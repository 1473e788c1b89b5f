"""The rehearsal stops cleanly on SIGTERM (``kill``, or a supervisor stopping it): the CLI command under
way is killed with it and its ``finally`` blocks run, rather than the process dying with its children
left running (docs/deploy.md, "The deploy rehearsal")."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from jobsched.local.embedded import process_alive as alive

#: A stand-in for the rehearsal's main thread at a step: ``stop_on_sigterm`` as ``main`` calls it, then
#: a child process run as ``CdkCli.run`` runs the CLI (``subprocess.run``), inside ``try/finally`` as
#: ``Rehearsal.run`` stops the emulated account. The child writes its process id and sleeps.
PROGRAM = """
import subprocess, sys
from pathlib import Path
from jobsched.rehearsal.main import stop_on_sigterm
stop_on_sigterm()
work = Path(sys.argv[1])
SLEEPER = "import os, sys, time; open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(120)"
try:
    subprocess.run([sys.executable, "-c", SLEEPER, str(work / "pid")], check=False)
finally:
    (work / "finally").write_text("ran")
"""


pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def test_sigterm_kills_the_command_under_way_and_runs_the_finally_blocks(tmp_path: Path) -> None:
    process = subprocess.Popen([sys.executable, "-c", PROGRAM, str(tmp_path)])
    pid_file = tmp_path / "pid"
    child = 0
    try:
        deadline = time.monotonic() + 60
        while not (pid_file.exists() and pid_file.read_text()) and time.monotonic() < deadline:
            time.sleep(0.05)
        child = int(pid_file.read_text())
        # When the rehearsal gets SIGTERM at that step
        process.send_signal(signal.SIGTERM)
        # Then it exits 143 (128 + SIGTERM), its finally block ran, and the command it ran is gone
        assert process.wait(timeout=30) == 143
        assert (tmp_path / "finally").read_text() == "ran"
        assert not alive(child)
    finally:
        process.kill()
        process.wait()
        if child and alive(child):
            os.kill(child, signal.SIGKILL)
