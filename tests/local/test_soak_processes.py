"""The soak benchmark finds every process of a real ``jobsched dev`` by name, the emulator forked from
the DynamoDB one included (decision 0044, seventeenth pass: one child imports moto and forks the other)."""

from __future__ import annotations

import re
import socket
from pathlib import Path

import pytest

from jobsched.bench import soak
from jobsched.bench.soak import SoakConfig, _cpu_seconds, _processes, _stop, start_dev
from jobsched.local.embedded import FORK_SERVERS
from tests.local.devproc import DevProcess


def _port(lines: list[str], label: str) -> int:
    """The port of a banner line ``  <label>  http://127.0.0.1:<port> ...``."""
    line = next(line for line in lines if line.strip().startswith(label))
    found = re.search(r"http://127\.0\.0\.1:(\d+)", line)
    assert found, line
    return int(found.group(1))


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


@pytest.mark.skipif(not FORK_SERVERS, reason="the soak reads /proc (Linux)")
def test_the_soak_names_the_dev_and_both_emulators() -> None:
    # Given a running jobsched dev (no container worker)
    dev = DevProcess("--no-demo", "--tenant", "soak=tok-soak", "--container-concurrency", "0")
    try:
        dev.wait_for_line("run events", timeout=90)
        moto, dynamodb = _port(dev.lines, "AWS"), _port(dev.lines, "DynamoDB")
        # When the soak looks for its processes
        named = _processes(dev.process.pid, {moto: "moto", dynamodb: "moto-dynamodb"})
        # Then it finds the dev and both emulators, the main one forked from DynamoDB's
        assert set(named) == {"dev", "moto", "moto-dynamodb"}
        assert _parent(named["moto-dynamodb"]) == dev.process.pid
        assert _parent(named["moto"]) == named["moto-dynamodb"]
        assert all(_cpu_seconds(pid) >= 0 for pid in named.values())
    finally:
        dev.stop()


@pytest.mark.skipif(not FORK_SERVERS, reason="the soak reads /proc (Linux)")
def test_the_soak_starts_its_dev_again_when_a_picked_port_was_taken(monkeypatch) -> None:
    # Given the soak's pick for its dev's AWS emulator is a port something else already listens on
    real_pick = soak._free_port
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        picks = iter([real_pick(), port])  # the API's port, then the emulator's
        monkeypatch.setattr(soak, "_free_port", lambda: next(picks, None) or real_pick())
        # When the soak starts its jobsched dev
        dev, api, ports = start_dev(SoakConfig())
    try:
        # Then it answers, started again on ports picked again, none of them the taken one
        assert port not in ports and f":{port}" not in api
        assert sorted(ports.values()) == ["moto", "moto-dynamodb"]
        assert dev.poll() is None
    finally:
        _stop(dev)
