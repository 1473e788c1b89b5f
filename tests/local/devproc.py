"""Run ``jobsched dev`` as a child process and read its output (for the command and e2e tests)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time

from jobsched.local.embedded import PORT_TAKEN_TEXT
from jobsched.local.server import free_port
from tests.children import start_reading


class DevProcess:
    """``python -m jobsched.cli dev --port <free> ...`` with its stdout lines collected by a thread.

    The port is picked free here and listened on by the dev a second or two later; if something took
    it meanwhile (another process's pick, a connection's local port), the dev exits saying so, and
    :meth:`wait_for_line` starts it again on a newly picked port (up to :data:`PORT_ATTEMPTS` starts):
    read :attr:`url` after the first wait, not before."""

    PORT_ATTEMPTS = 3

    def __init__(self, *args: str, env: dict[str, str] | None = None, cwd: str | os.PathLike | None = None):
        self._args, self._cwd = args, cwd
        self._env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "JOBSCHED_"))}
        self._env.update(env or {})
        self._env["PYTHONUNBUFFERED"] = "1"
        self._env["PYTHONFAULTHANDLER"] = "1"  # a stop that hangs shows its threads (see stop)
        self.starts = 0
        self._start()

    def _start(self) -> None:
        self.starts += 1
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        command = [sys.executable, "-m", "jobsched.cli", "dev", "--port", str(self.port), *self._args]
        self.process = start_reading(command, env=self._env, cwd=self._cwd)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, args=(self.process, self.lines), daemon=True)
        self._reader.start()

    @staticmethod
    def _read(process: subprocess.Popen[str], lines: list[str]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line.rstrip("\n"))

    def _restarted(self) -> bool:
        """If the dev ended because a port was taken, start it again on a new one (True)."""
        self._reader.join(5)  # its last lines
        if self.starts >= self.PORT_ATTEMPTS or not any(PORT_TAKEN_TEXT in line for line in self.lines):
            return False
        self._start()
        return True

    def wait_for_line(self, text: str, timeout: float = 30.0) -> str:
        """The first output line containing ``text``; fails after ``timeout`` s or if the process ends."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in list(self.lines):
                if text in line:
                    return line
            if self.process.poll() is not None and not any(text in line for line in self.lines):
                if self._restarted():
                    continue
                raise AssertionError(
                    f"jobsched dev exited ({self.process.returncode}):\n" + "\n".join(self.lines)
                )
            time.sleep(0.05)
        raise AssertionError(f"no line with {text!r} within {timeout} s:\n" + "\n".join(self.lines))

    def wait_for_event(self, event: str, job_name: str, run_id: str = "", timeout: float = 30.0) -> str:
        """The first run-event line ``<time>  <event>  <job name (padded)>  <run id>`` for these."""
        pattern = re.compile(
            rf"^\d\d:\d\d:\d\d  {re.escape(event)} +{re.escape(job_name)} +{re.escape(run_id)}"
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in list(self.lines):
                if pattern.match(line):
                    return line
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        raise AssertionError(
            f"no {event} line for {job_name} {run_id} within {timeout} s:\n" + "\n".join(self.lines)
        )

    def stop(self, sig: int = signal.SIGINT, timeout: float = 10.0) -> tuple[int, float]:
        """Send ``sig`` and wait for the exit; returns (exit status, seconds it took)."""
        started = time.monotonic()
        self.process.send_signal(sig)
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            # Say why: SIGABRT makes the child's faulthandler (PYTHONFAULTHANDLER) print every thread's
            # stack into the output this object collects.
            self.process.send_signal(signal.SIGABRT)
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
            time.sleep(0.5)  # the reader thread takes the last lines
            raise AssertionError(
                f"jobsched dev did not stop within {timeout} s of signal {sig}; its last output:\n"
                + "\n".join(self.lines[-200:])
            ) from None
        return code, time.monotonic() - started

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(5)
