"""The tests' long-lived child processes end with the test process, however it ends.

The suite starts `jobsched dev`, embedded modes (``tests.local.e2e_helpers``) and container workers as
child processes and stops them in fixtures. A test process that is killed (SIGKILL, an xdist worker
ended by a crash or by ``pytest-timeout``'s signal method failing) runs no fixture teardown, and those
children lived on: a `jobsched dev` with its emulators and container worker, idle at a few per cent of
a core each, on ports the next run may want. The emulator's and the container worker's own processes
already end when the process that started them goes (they watch their stdin); these are the processes
the tests start themselves.

:func:`die_with_parent` is a ``preexec_fn`` for :class:`subprocess.Popen`: Linux's
``prctl(PR_SET_PDEATHSIG)`` has the kernel send the child SIGTERM (its graceful stop, which stops its
own children) when the thread that started it ends. That is the test process's main thread (pytest and
its xdist workers run tests and fixtures there), so "the thread" is "the process"; started from any
other thread (which may end while the child should live), nothing is asked for. Elsewhere than Linux
it does nothing. :func:`start_reading` starts a child so, its output one text pipe to read.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

#: ``PR_SET_PDEATHSIG`` from ``<linux/prctl.h>``.
PR_SET_PDEATHSIG = 1


def die_with_parent(sig: int = signal.SIGTERM) -> Callable[[], None] | None:
    """The ``preexec_fn`` that has the child sent ``sig`` when this process's main thread ends; None
    (no ``preexec_fn``) off Linux or when called from another thread."""
    if not sys.platform.startswith("linux") or threading.current_thread() is not threading.main_thread():
        return None
    parent = os.getpid()
    libc = ctypes.CDLL(None, use_errno=True)

    def preexec() -> None:
        libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the request was made: no signal will come
            os.kill(os.getpid(), sig)

    return preexec


def start_reading(
    argv: Sequence[str], *, env: Mapping[str, str], cwd: str | os.PathLike[str] | Path | None = None
) -> subprocess.Popen[str]:
    """Start ``argv`` with its stdout and stderr as one text pipe for the caller to read, ended with
    this process (:func:`die_with_parent`): how the tests start `jobsched dev` and embedded modes."""
    return subprocess.Popen(
        list(argv),
        cwd=cwd,
        env=dict(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=die_with_parent(),
    )
