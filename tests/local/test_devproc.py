"""The tests' ``jobsched dev`` helper: a port taken between its pick and the dev's listen (a pick of
another process, or a connection's local port) starts the dev again on another, as the embedded mode
does for its emulators' ports (decision 0044, seventeenth pass)."""

from __future__ import annotations

import socket
import urllib.request

from jobsched.local.server import free_port
from tests.local import devproc
from tests.local.devproc import DevProcess


def test_a_dev_whose_picked_port_was_taken_is_started_again_on_another(monkeypatch) -> None:
    # Given a dev whose first picked port is taken before it listens
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        first = taken.getsockname()[1]
        picks = iter([first])
        monkeypatch.setattr(devproc, "free_port", lambda: next(picks, None) or free_port())
        dev = DevProcess("--no-demo", "--tenant", "acme=tok-acme", "--container-concurrency", "0")
        try:
            # When its start is awaited, Then it was started twice and serves on another port
            dev.wait_for_line("run events", timeout=90)
            assert dev.starts == 2 and dev.port != first
            with urllib.request.urlopen(f"{dev.url}/health", timeout=10) as answer:
                assert answer.status == 200
        finally:
            dev.stop()
