"""The container pool in the embedded mode: ``jobsched worker --pool container`` as a child process.

On AWS the container queue is consumed by ECS Fargate tasks running the container worker loop
(:mod:`jobsched.compose.container_worker`); here ``jobsched dev`` starts the same loop as a process of
its own, with the embedded mode's environment (the functions' variables, the emulator's endpoints), so
local = cloud: the same command, the same variables, its own interpreter (as a task is its own
machine). Its output goes to the dev log, each line prefixed ``[container] ``.

Stopping: :meth:`ContainerProcess.request_stop` sends SIGTERM (the loop's graceful stop, with the
embedded mode's shutdown grace as its stop timeout: runs still in progress then are handed back);
:meth:`ContainerProcess.wait` waits for the exit and kills the process past its bound. A parent that
dies without stopping it (SIGKILL) closes the child's stdin, and the child then stops itself, as the
emulator's processes do.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Mapping

#: The child's long poll (SQS's longest is 20 s): an idle child makes one receive a second. A stop
#: waits for the poll in flight (the container worker's graceful stop, docs/container-worker.md) within
#: its stop timeout (the embedded mode's 2 s grace), so this bounds how long the child takes to stop
#: when it runs nothing: at most a second (with 5 s, every stop of the embedded mode waited out the
#: whole 2 s grace; decision 0044, twelfth pass). Its idle receives cost about 3 ms each.
WAIT_SECONDS = 1
#: Each line of the child's output, in the dev log, starts with this.
LINE_PREFIX = "[container] "

#: The child's program: on EOF of its stdin (the parent is gone) it signals itself to stop, then runs
#: ``jobsched worker`` with the arguments it was given (the garbage collector off during its imports and
#: settled after them, as in the emulator's processes: :mod:`jobsched.local.collector`; an ECS task runs
#: the same loop with CPython's defaults).
_CHILD = """
import os, signal, sys, threading
def _orphaned():
    sys.stdin.buffer.read()
    os.kill(os.getpid(), signal.SIGTERM)
threading.Thread(target=_orphaned, daemon=True).start()
from jobsched.local import collector
collector.quiet()
from jobsched.cli.main import main
collector.settle()
sys.exit(main(["worker", *sys.argv[1:]]))
"""


class ContainerProcess:
    """One container worker process consuming the container queue."""

    def __init__(
        self,
        environ: Mapping[str, str],
        *,
        concurrency: int = 1,
        stop_timeout_seconds: float = 2.0,
        prefix: str = LINE_PREFIX,
        wait_seconds: int = WAIT_SECONDS,
    ):
        self.environ = dict(environ)
        self.concurrency = concurrency
        self.stop_timeout_seconds = stop_timeout_seconds
        self.prefix = prefix
        self.wait_seconds = wait_seconds
        self.process: subprocess.Popen[str] | None = None
        self._reader: threading.Thread | None = None

    @property
    def command(self) -> list[str]:
        return [
            sys.executable,
            "-c",
            _CHILD,
            "--pool",
            "container",
            "--concurrency",
            str(self.concurrency),
            "--stop-timeout",
            f"{self.stop_timeout_seconds:g}",
            "--wait-seconds",
            str(self.wait_seconds),
        ]

    def start(self) -> None:
        self.process = subprocess.Popen(
            self.command,
            env={**self.environ, "PYTHONUNBUFFERED": "1"},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self._reader = threading.Thread(target=self._copy_output, name="container-output", daemon=True)
        self._reader.start()

    def _copy_output(self) -> None:
        """Each line of the child's, prefixed, to this process's standard output as it is when written
        (``jobsched dev`` points it at the log file)."""
        assert self.process is not None and self.process.stdout is not None
        for line in self.process.stdout:
            print(self.prefix + line.rstrip("\n"), file=sys.stdout, flush=True)

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def request_stop(self) -> None:
        """SIGTERM: the loop's graceful stop begins."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()

    def wait(self, timeout: float) -> int | None:
        """Wait up to ``timeout`` s (after :meth:`request_stop`) for the exit; kill it past that. The
        exit status (None if there was no process)."""
        process, self.process = self.process, None
        if process is None:
            return None
        try:
            code = process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            code = process.wait(5)
        if process.stdin is not None:
            process.stdin.close()
        if self._reader is not None:
            self._reader.join(1.0)
        return code
