"""Run ``jobsched dev`` as a child process and read its output (for the command and e2e tests)."""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time

from jobsched.local.server import free_port
from tests.children import start_reading


class DevProcess:
    """``python -m jobsched.cli dev --port <free> ...`` with its stdout lines collected by a thread."""

    def __init__(self, *args: str, env: dict[str, str] | None = None, cwd: str | os.PathLike | None = None):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        command = [sys.executable, "-m", "jobsched.cli", "dev", "--port", str(self.port), *args]
        child_env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "JOBSCHED_"))}
        child_env.update(env or {})
        child_env["PYTHONUNBUFFERED"] = "1"
        child_env["PYTHONFAULTHANDLER"] = "1"  # a stop that hangs shows its threads (see stop)
        self.process = start_reading(command, env=child_env, cwd=cwd)
        self.lines: list[str] = []
        self._queue: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_for_line(self, text: str, timeout: float = 30.0) -> str:
        """The first output line containing ``text``; fails after ``timeout`` s or if the process ends."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in list(self.lines):
                if text in line:
                    return line
            if self.process.poll() is not None and not any(text in line for line in self.lines):
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
