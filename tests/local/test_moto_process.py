"""The embedded mode's moto server child: what its start says when the child dies before serving."""

from __future__ import annotations

import os

import pytest

from jobsched.local.embedded import MotoProcess

# A child that starts several threads, then dies of a fatal signal with faulthandler on: its dump lists
# every thread, so the line naming the signal comes well before stderr's last lines.
_CRASHING = """
import ctypes, threading, time
for _ in range(3):
    threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
time.sleep(0.2)
ctypes.string_at(0)
"""


class Crashing(MotoProcess):
    CHILD_PROGRAM = _CRASHING


def test_a_child_that_dies_of_a_signal_names_it_in_the_error() -> None:
    # Given a child that dies of a segmentation fault with faulthandler on, before it serves
    server = Crashing()
    environ = {**os.environ, "PYTHONFAULTHANDLER": "1"}
    # When its start is awaited, Then the error names the fatal signal and ends with the dump's last lines
    fatal = r"did not start: Fatal Python error: Segmentation fault .*"
    with pytest.raises(RuntimeError, match=fatal) as error:
        server.start(environ)
    assert "most recent call first" in str(error.value)
