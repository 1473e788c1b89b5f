"""The soak benchmark finds every process of a real ``jobsched dev`` by name, the emulator forked from
the DynamoDB one included (decision 0044, seventeenth pass: one child imports moto and forks the other)."""

from __future__ import annotations

import re
import subprocess
import sys
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
def test_without_a_port_the_soak_lets_its_dev_pick_every_port_and_reads_them_from_its_banner() -> None:
    # Given no port asked for / When the soak starts its jobsched dev
    dev, api, ports = start_dev(SoakConfig())
    try:
        # Then the dev was asked for port 0 and no emulator port (it picks them, none can be taken
        # between a pick of the soak's and the dev's listen), and the soak found what it listens on:
        # the API answering at the banner's URL, each emulator process by the banner's port
        argv = Path(f"/proc/{dev.pid}/cmdline").read_bytes().split(b"\0")
        assert argv[argv.index(b"--port") + 1] == b"0"
        assert b"--moto-port" not in argv and b"--dynamodb-port" not in argv
        assert int(api.rsplit(":", 1)[1]) > 0
        named = _processes(dev.pid, ports)
        assert {"dev", "moto", "moto-dynamodb"} <= set(named)
        assert dev.poll() is None
    finally:
        _stop(dev)


def test_a_child_that_ends_while_the_processes_are_named_is_left_out(monkeypatch) -> None:
    # Given a child of the dev listed, which then ended (a short-lived one: seen in a CI run, the soak's
    # naming read /proc/<pid>/cmdline of a child gone since it was listed, FileNotFoundError)
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    assert not Path(f"/proc/{gone.pid}").exists()
    monkeypatch.setattr(soak, "_children", lambda pid: [gone.pid] if pid == 4242 else [])
    # When the dev's processes are named / Then the child is left out, the dev named
    assert _processes(4242, {}) == {"dev": 4242}
