"""A stop signal handed by the kernel to a thread other than the main one still stops `jobsched dev`
and the container worker: their main threads wait in steps (``SIGNAL_POLL_SECONDS``), and Python runs
a signal's handler only when the main thread runs Python code. With an untimed wait the main thread
stayed blocked: a CI run's `jobsched dev` ignored SIGINT for 30 s, its main thread in
``EmbeddedMode.wait`` and "stopping..." never printed (2026-12-05).

Each check runs in a child process: the main thread blocks SIGINT (so the kernel hands it to a helper
thread, which does not block it) and waits; the helper thread sends the process SIGINT."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from tests.local.e2e_helpers import ROOT

SIGNAL_FROM_ANOTHER_THREAD = textwrap.dedent(
    """
    import os, signal, threading, time

    def signal_from_another_thread():
        def later():
            time.sleep(0.3)
            os.kill(os.getpid(), signal.SIGINT)

        threading.Thread(target=later).start()  # started before the block: it keeps SIGINT deliverable
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    """
)


def _run(body: str) -> subprocess.CompletedProcess[str]:
    script = SIGNAL_FROM_ANOTHER_THREAD + textwrap.dedent(body)
    return subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=20
    )


def test_the_embedded_modes_wait_returns_on_a_signal_another_thread_received() -> None:
    result = _run(
        """
        from jobsched.cli.commands._process import on_stop_signals
        from jobsched.local.config import LocalConfig
        from jobsched.local.embedded import EmbeddedMode

        mode = EmbeddedMode(LocalConfig(), environ={})
        on_stop_signals(mode.request_stop)
        signal_from_another_thread()
        started = time.monotonic()
        print("stopped" if mode.wait(10) else "timed out", round(time.monotonic() - started, 1))
        """
    )
    assert result.returncode == 0, result.stderr
    word, seconds = result.stdout.split()
    assert word == "stopped" and float(seconds) < 3, result.stdout


def test_the_container_workers_loop_returns_on_a_signal_another_thread_received() -> None:
    result = _run(
        """
        from datetime import UTC, datetime
        from jobsched.aws.task_protection import TaskProtection
        from jobsched.cli.commands._process import on_stop_signals
        from jobsched.compose.container_worker import ContainerWorker, LoopConfig
        from jobsched.core.clock import FakeClock

        class Idle:  # a queue with nothing on it
            queue_url = "idle"
            def receive(self, count, wait_seconds):
                time.sleep(0.05)
                return []

        loop = ContainerWorker(None, Idle(), FakeClock(datetime(2026, 12, 5, tzinfo=UTC)),
                               config=LoopConfig(wait_seconds=0), protection=TaskProtection(None))
        on_stop_signals(loop.request_stop)
        signal_from_another_thread()
        started = time.monotonic()
        threading.Timer(10, lambda: os._exit(3)).start()  # the loop never stopped
        print("stopped", loop.run(), round(time.monotonic() - started, 1))
        os._exit(0)
        """
    )
    assert result.returncode == 0, (result.returncode, result.stdout, result.stderr)
    word, code, seconds = result.stdout.split()
    assert (word, code) == ("stopped", "0") and float(seconds) < 3, result.stdout
