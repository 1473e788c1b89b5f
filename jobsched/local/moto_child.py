"""The emulators' child process: moto imported once, one forked process per further port.

The embedded mode runs two moto servers (DynamoDB, and every other service: :mod:`jobsched.local.embedded`).
Each used to be a process of its own that imported moto, Flask, werkzeug, boto3 and the embedded
mode's fixes: about 0.65 s of CPU each, the same work twice at every start. Now the first child
imports them once and, on Linux, forks the second server from itself before it serves (decision 0044,
seventeenth pass): ``--also PORT`` on the child's command line asks for a further server on the same
host, with ``MOTO_PORT`` set to that port, as its own process had. The fork happens before any server
thread runs; the only other thread then is the watch on the parent's end of stdin, which holds no
lock (it reads the file descriptor directly), and each forked server starts its own watch on the
same pipe, so all of them end when the parent's end closes.

The first child writes the forked servers' process ids to its stdout, one line, in the order the
ports were given, and from then on its stdout and theirs go nowhere. It ignores ``SIGCHLD``, so a
forked server that ends is reaped at once.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable

#: The option that asks the child for a further server on the given port.
ALSO = "--also"


def split_also(argv: list[str]) -> tuple[list[str], list[str]]:
    """``argv`` without its ``--also PORT`` pairs, and those ports in order."""
    rest: list[str] = []
    ports: list[str] = []
    items = iter(argv)
    for item in items:
        if item == ALSO:
            port = next(items, None)
            if port is None or not port.isdigit():
                raise SystemExit(f"{ALSO} needs a port number, not {port!r}")
            ports.append(port)
        else:
            rest.append(item)
    return rest, ports


def with_port(argv: list[str], port: str) -> list[str]:
    """moto's server arguments ``argv`` with ``-p`` (``--port``) set to ``port``."""
    out = list(argv)
    for flag in ("-p", "--port"):
        if flag in out:
            out[out.index(flag) + 1] = port
            return out
    return [*out, "-p", port]


def _quiet_stdout() -> None:
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)


def fork_servers(argv: list[str], watch: Callable[[], None]) -> list[str]:
    """Fork one process per ``--also`` port of ``argv``; return the arguments of moto's server for the
    calling process -- its own, or in a forked one that port's. ``watch`` is the function of the
    thread that ends the process when the parent's end of stdin closes; each forked process starts it
    again (a fork keeps only the thread that forked)."""
    own, ports = split_also(argv)
    if not ports:
        return own
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    pids: list[int] = []
    for port in ports:
        pid = os.fork()
        if pid == 0:
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            os.environ["MOTO_PORT"] = port
            _quiet_stdout()
            threading.Thread(target=watch, daemon=True).start()
            return with_port(own, port)
        pids.append(pid)
    os.write(1, (" ".join(str(pid) for pid in pids) + "\n").encode())
    _quiet_stdout()
    return own
