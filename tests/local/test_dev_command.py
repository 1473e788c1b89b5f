"""``jobsched dev``: tenants from the command line, and a clean stop on SIGINT / SIGTERM."""

from __future__ import annotations

import argparse
import os
import signal
import socket
import urllib.error
import urllib.request

import pytest

from jobsched.cli.commands.dev import add_arguments, run
from jobsched.core.errors import ValidationError
from jobsched.local.config import resolve_tenants
from tests.local.devproc import DevProcess


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_jobsched_dev_serves_http_and_stops_cleanly_on_a_signal(sig: int) -> None:
    # Given `jobsched dev` running with one tenant and no demo
    dev = DevProcess("--no-demo", "--tenant", "acme=tok-acme")
    try:
        dev.wait_for_line("run events")
        # When a request arrives, Then the API answers it (any HTTP status: the bridge is serving)
        request = urllib.request.Request(
            f"{dev.url}/openapi.json", headers={"Authorization": "Bearer tok-acme"}
        )
        try:
            status = urllib.request.urlopen(request, timeout=10).status
        except urllib.error.HTTPError as error:
            status = error.code
        assert 200 <= status < 600
        # When the signal arrives
        code, seconds = dev.stop(sig)
    finally:
        dev.kill()
    # Then it stops cleanly within a few seconds
    assert code == 0
    assert seconds < 5
    assert dev.lines[-1] == "stopped"
    assert any("tenant    acme  token tok-acme" in line for line in dev.lines)
    # And the functions' JSON logs and metrics went to the log file, not between the event lines
    assert any(line.startswith("  logs      ") for line in dev.lines)
    assert not any(line.startswith("{") for line in dev.lines)


def test_tenants_come_from_name_token_pairs() -> None:
    tenants, generated = resolve_tenants(["acme=t1", "globex=t2"], env_token="ignored")
    assert tenants == {"acme": "t1", "globex": "t2"}
    assert generated is False


def test_without_tenants_the_default_tenant_uses_the_jobsched_token() -> None:
    assert resolve_tenants([], env_token="from-env") == ({"default": "from-env"}, False)


def test_without_tenants_or_token_a_token_is_generated() -> None:
    tenants, generated = resolve_tenants([], env_token=None)
    assert list(tenants) == ["default"]
    assert len(tenants["default"]) >= 24
    assert generated is True


@pytest.mark.parametrize("pairs", [["acme"], ["=tok"], ["acme="], ["a=t", "a=u"], ["a=t", "b=t"]])
def test_a_bad_tenant_option_is_a_validation_error(pairs: list[str]) -> None:
    with pytest.raises(ValidationError):
        resolve_tenants(pairs, env_token=None)


def test_a_busy_api_port_is_reported_and_leaves_nothing_behind(capsys: pytest.CaptureFixture[str]) -> None:
    # Given the API port is already taken
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        before = dict(os.environ)
        # When `jobsched dev` is started on it
        code = run(
            parser.parse_args(["--port", str(port), "--no-demo", "--tenant", "a=t", "--verbose"]),
            out=lambda s: None,
        )
    # Then it exits 1 naming the port, and the process environment is unchanged
    assert code == 1
    assert f"is port {port} in use?" in capsys.readouterr().err
    assert dict(os.environ) == before


@pytest.mark.parametrize(
    "argv", [["--port", "70000"], ["--port", "-1"], ["--shards", "0"], ["--sweeper-seconds", "0"]]
)
def test_out_of_range_options_are_usage_errors(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    with pytest.raises(SystemExit) as exited:
        parser.parse_args(argv)
    assert exited.value.code == 2
