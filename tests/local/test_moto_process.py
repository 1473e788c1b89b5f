"""The embedded mode's moto server children: what a start says when a child dies before serving; one
child serving a second port from a forked process (decision 0044, seventeenth pass)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import boto3
import pytest

from jobsched.local.embedded import FORK_SERVERS, MotoProcess, process_alive
from jobsched.local.moto_child import split_also, with_port

ROOT = Path(__file__).resolve().parents[2]

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


def _parent_of(pid: int) -> int:
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        return int(stat.read().rpartition(")")[2].split()[1])


def _answers(server: MotoProcess) -> bool:
    with urllib.request.urlopen(f"{server.endpoint_url}/moto-api/data.json", timeout=5) as response:
        return response.status == 200


@pytest.mark.skipif(not FORK_SERVERS, reason="one child serves several ports on Linux only")
def test_a_follower_is_forked_from_the_first_child_and_each_stops_on_its_own() -> None:
    # Given a server spawned with a follower (the embedded mode's DynamoDB and main servers)
    leader, follower = MotoProcess(), MotoProcess()
    environ = dict(os.environ)
    leader.spawn(environ, followers=[follower])
    try:
        leader.wait_started()
        follower.wait_started()
        # Then both answer, from two processes: the follower's forked from the first child
        assert _answers(leader) and _answers(follower)
        assert leader._process is not None and follower._pid is not None
        assert _parent_of(follower._pid) == leader._process.pid
        # And the first child's environment names its own port; the follower's queue URLs its port
        sqs = boto3.client(
            "sqs",
            endpoint_url=follower.endpoint_url,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
        url = sqs.create_queue(QueueName="q")["QueueUrl"]
        assert f":{follower.port}/" in url
        # When the follower is stopped, Then its process ends and the first child still answers
        pid = follower._pid
        follower.stop()
        assert not process_alive(pid)
        assert _answers(leader)
    finally:
        follower.stop()
        leader.stop()
    # And the first child ended with its stop
    assert leader._process is None


@pytest.mark.skipif(not FORK_SERVERS, reason="one child serves several ports on Linux only")
def test_a_follower_that_cannot_serve_says_why_with_its_port() -> None:
    # Given a follower whose port is taken
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        leader, follower = MotoProcess(), MotoProcess(taken.getsockname()[1])
        leader.spawn(dict(os.environ), followers=[follower])
        try:
            leader.wait_started()
            # When its start is awaited, Then the error names its port and what the server said
            with pytest.raises(RuntimeError, match=rf"port {follower.port} did not start: .*in use"):
                follower.wait_started()
            # And the first child serves on
            assert _answers(leader)
        finally:
            follower.stop()
            leader.stop()


@pytest.mark.skipif(not FORK_SERVERS, reason="one child serves several ports on Linux only")
def test_both_servers_end_when_the_process_that_spawned_them_is_killed(tmp_path) -> None:
    # Given a process that spawns a server with a follower, then is killed without stopping them
    pids = tmp_path / "pids"
    program = f"""
import os, sys, time
from jobsched.local.embedded import MotoProcess
leader, follower = MotoProcess(), MotoProcess()
leader.spawn(dict(os.environ), followers=[follower])
leader.wait_started(); follower.wait_started()
open({str(pids)!r}, "w").write(f"{{leader._process.pid}} {{follower._pid}}")
time.sleep(600)
"""
    spawner = subprocess.Popen([sys.executable, "-c", program], cwd=ROOT)
    try:
        deadline = time.monotonic() + 60
        while not (pids.exists() and pids.read_text()) and time.monotonic() < deadline:
            time.sleep(0.1)
        children = [int(pid) for pid in pids.read_text().split()]
        assert len(children) == 2 and all(os.path.exists(f"/proc/{pid}") for pid in children)
        spawner.kill()
        spawner.wait(10)
        # Then both servers end within seconds (each watches the spawner's end of the same stdin pipe)
        deadline = time.monotonic() + 10
        while any(process_alive(pid) for pid in children) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(process_alive(pid) for pid in children)
    finally:
        spawner.kill()


def test_also_ports_are_split_from_the_servers_arguments() -> None:
    assert split_also(["-H", "h", "-p", "1", "--also", "2", "--also", "3"]) == (
        ["-H", "h", "-p", "1"],
        ["2", "3"],
    )
    assert split_also(["-H", "h", "-p", "1"]) == (["-H", "h", "-p", "1"], [])
    assert with_port(["-H", "h", "-p", "1"], "2") == ["-H", "h", "-p", "2"]
    with pytest.raises(SystemExit, match="--also needs a port number"):
        split_also(["-p", "1", "--also"])


def test_a_picked_port_taken_before_the_emulator_listens_is_picked_again(caplog) -> None:
    # Given an embedded mode whose emulator ports were picked free, and the DynamoDB one taken since
    # (another process's pick, or a connection's local port: seen once in a clean-clone CI)
    from jobsched.local.config import LocalConfig
    from jobsched.local.embedded import EmbeddedMode

    mode = EmbeddedMode(LocalConfig(port=0, tenants={"t": "tok"}, demo=False), environ=dict(os.environ))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", mode.dynamodb_server.port))
        taken.listen()
        first = mode.dynamodb_server.port
        try:
            # When its emulators start
            mode._start_servers()
            # Then they start on other ports, both answering, and the environment names them
            assert mode.dynamodb_server.port != first
            assert _answers(mode.dynamodb_server) and _answers(mode.server)
            assert mode.environ["MOTO_PORT"] == str(mode.server.port)
            assert f"port {first} did not start: Address already in use" in caplog.text
        finally:
            mode.server.stop()
            mode.dynamodb_server.stop()


def test_a_port_asked_for_and_taken_fails_the_start_with_the_reason() -> None:
    # Given an embedded mode asked for a DynamoDB port that is taken
    from jobsched.local.config import LocalConfig
    from jobsched.local.embedded import EmbeddedMode, PortTaken

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        mode = EmbeddedMode(
            LocalConfig(port=0, tenants={"t": "tok"}, demo=False, dynamodb_port=port),
            environ=dict(os.environ),
        )
        try:
            # When its emulators start, Then the start fails naming the port, and no other is tried
            with pytest.raises(PortTaken, match=rf"port {port} did not start: Address already in use"):
                mode._start_servers()
            assert mode.dynamodb_server.port == port
        finally:
            mode.server.stop()
            mode.dynamodb_server.stop()


def test_a_single_server_whose_picked_port_was_taken_starts_on_another() -> None:
    # Given a server (the deploy rehearsal's kind: one child) whose picked port was taken since
    server = MotoProcess()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", server.port))
        taken.listen()
        first = server.port
        environ = dict(os.environ)
        try:
            # When it starts, Then it listens on another port, which the environment names
            server.start(environ)
            assert server.port != first and _answers(server)
            assert environ["MOTO_PORT"] == str(server.port)
        finally:
            server.stop()
