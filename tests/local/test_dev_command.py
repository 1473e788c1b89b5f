"""``jobsched dev``: tenants from the command line, and a clean stop on SIGINT / SIGTERM."""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from jobsched.cli.commands.dev import add_arguments, run
from jobsched.core.errors import ValidationError
from jobsched.local.config import resolve_tenants
from jobsched.local.embedded import PORT_TAKEN_TEXT
from tests.local.devproc import DevProcess


def test_a_sweeper_grace_under_ten_seconds_is_refused_and_the_default_is_aws_s(capsys) -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert parser.parse_args([]).sweeper_grace_seconds == 120
    assert parser.parse_args(["--sweeper-grace-seconds", "15"]).sweeper_grace_seconds == 15
    with pytest.raises(SystemExit) as exited:
        parser.parse_args(["--sweeper-grace-seconds", "9"])
    assert exited.value.code == 2
    assert "--sweeper-grace-seconds: 9 must be at least 10" in capsys.readouterr().err


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


def test_the_log_directory_is_the_flag_then_the_environment_then_the_user_cache() -> None:
    from jobsched.cli.commands.dev import log_directory

    assert log_directory("/x/logs", {"JOBSCHED_DEV_LOG_DIR": "/y"}) == Path("/x/logs")
    assert log_directory(None, {"JOBSCHED_DEV_LOG_DIR": "/y", "XDG_CACHE_HOME": "/c"}) == Path("/y")
    assert log_directory(None, {"XDG_CACHE_HOME": "/c"}) == Path("/c/jobsched/dev-logs")
    assert log_directory(None, {}) == Path.home() / ".cache" / "jobsched" / "dev-logs"


def test_a_new_log_leaves_the_newest_logs_and_nothing_else_touched(tmp_path) -> None:
    """Given seven earlier dev logs and an unrelated file in the log directory
    When a new log is started
    Then the four newest earlier logs remain (five with the new one) and the other file is untouched"""
    from datetime import datetime

    from jobsched.cli.commands.dev import KEEP_LOGS, new_log_file

    for n in range(7):
        old = tmp_path / f"jobsched-dev-2026010{n}T000000-1.log"
        old.write_text("x")
        os.utime(old, (1_700_000_000 + n, 1_700_000_000 + n))
    (tmp_path / "notes.txt").write_text("mine")
    path = new_log_file(tmp_path, now=datetime(2026, 2, 1, 12, 0, 0))
    path.write_text("")
    kept = sorted(p.name for p in tmp_path.glob("jobsched-dev-*.log"))
    assert len(kept) == KEEP_LOGS == 5
    assert kept[:4] == [f"jobsched-dev-2026010{n}T000000-1.log" for n in (3, 4, 5, 6)]
    assert path.name == f"jobsched-dev-20260201T120000-{os.getpid()}.log"
    assert (tmp_path / "notes.txt").read_text() == "mine"


def _dev_on_picked_emulator_ports(logs: Path) -> tuple[DevProcess, int, int]:
    """`jobsched dev` with both emulators on ports picked here, as a user would pin them. A pinned port
    taken between the pick and the dev's listen fails the start (a port asked for is never moved);
    then the ports are picked again, up to DevProcess.PORT_ATTEMPTS times, each with a log directory
    of its own."""
    from jobsched.local.server import free_port

    for attempt in range(1, DevProcess.PORT_ATTEMPTS + 1):
        moto_port, dynamodb_port = free_port(), free_port()
        dev = DevProcess(
            "--no-demo", "--tenant", "a=t", "--moto-port", str(moto_port),
            "--dynamodb-port", str(dynamodb_port), "--log-dir", str(logs / str(attempt)),
            "--container-concurrency", "0",  # no container worker process: no run here
        )  # fmt: skip
        try:
            dev.wait_for_line("run events", timeout=90)
            return dev, moto_port, dynamodb_port
        except AssertionError:
            dev.kill()
            if attempt == DevProcess.PORT_ATTEMPTS or not any(PORT_TAKEN_TEXT in line for line in dev.lines):
                raise
    raise AssertionError("unreachable")  # pragma: no cover


@pytest.mark.slow
def test_dev_pins_the_dynamodb_port_and_writes_its_log_in_the_log_directory(tmp_path) -> None:
    """Given free ports for both emulators and a log directory
    When `jobsched dev --moto-port A --dynamodb-port B --log-dir DIR` starts
    Then the banner shows both ports and a log file in DIR, and DynamoDB answers on B"""
    dev, moto_port, dynamodb_port = _dev_on_picked_emulator_ports(tmp_path / "logs")
    try:
        assert dev.wait_for_line("  DynamoDB  ").startswith(f"  DynamoDB  http://127.0.0.1:{dynamodb_port} ")
        assert dev.wait_for_line("  AWS       ").startswith(f"  AWS       http://127.0.0.1:{moto_port} ")
        log_line = dev.wait_for_line("  logs      ")
        logs = list((tmp_path / "logs").glob("*/jobsched-dev-*.log"))
        assert len(logs) == 1 and str(logs[0]) in log_line
        with urllib.request.urlopen(f"http://127.0.0.1:{dynamodb_port}/moto-api/data.json", timeout=10) as r:
            assert r.status == 200
        code, _ = dev.stop()
    finally:
        dev.kill()
    assert code == 0


def test_a_retention_in_minutes_under_ten_is_refused_before_anything_starts(capsys) -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    with pytest.raises(SystemExit) as exited:
        parser.parse_args(["--retention-minutes", "5"])
    assert exited.value.code == 2
    assert "--retention-minutes: 5 must be at least 10" in capsys.readouterr().err


@pytest.mark.slow
def test_with_a_retention_in_minutes_a_run_expires_that_long_after_it_was_due() -> None:
    """Given `jobsched dev --retention-minutes 10`, When a tenant triggers a run, Then the run shows
    `expires_at` 10 minutes after its due instant (the housekeeping deletes it then, as DynamoDB TTL
    would), where the default keeps it 30 days."""
    import json
    from datetime import datetime, timedelta

    dev = DevProcess(  # (no container worker process: its run is a Lambda queue's)
        "--no-demo", "--tenant", "acme=tok-acme", "--retention-minutes", "10", "--container-concurrency", "0"
    )
    try:
        dev.wait_for_line("run events")

        def call(method: str, path: str, body: dict | None = None) -> dict:
            request = urllib.request.Request(
                f"{dev.url}{path}",
                data=None if body is None else json.dumps(body).encode(),
                method=method,
                headers={"Authorization": "Bearer tok-acme", "Content-Type": "application/json"},
            )
            with urllib.request.urlopen(request, timeout=30) as response:
                return json.loads(response.read())

        job = call(
            "POST", "/jobs", {"name": "short", "schedule": "@daily", "target": {"handler": "demo.echo"}}
        )
        triggered = call("POST", "/jobs/" + job["id"] + "/trigger", {})
        run = call("GET", "/runs/" + triggered["id"])
    finally:
        dev.kill()

    def instant(text: str) -> datetime:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))

    kept = instant(run["expires_at"]) - instant(run["scheduled_at"])
    assert timedelta(minutes=10) - timedelta(seconds=1) <= kept <= timedelta(minutes=10)


@pytest.mark.slow
def test_jobsched_dev_runs_the_container_worker_as_a_process_of_its_own_and_stops_it(tmp_path) -> None:
    # Given `jobsched dev` with a container worker of 2 slots and a 30 s Lambda limit
    dev = DevProcess(
        "--no-demo", "--tenant", "acme=tok-acme", "--container-concurrency", "2", "--lambda-time-limit", "30",
        "--log-dir", str(tmp_path / "logs"),
    )  # fmt: skip
    try:
        dev.wait_for_line("run events", timeout=90)
        [log] = list((tmp_path / "logs").glob("jobsched-dev-*.log"))
        # Then its output reaches the dev log, prefixed, once the loop consumes the container queue
        deadline = time.monotonic() + 30
        while "container worker started" not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.2)
        started = [line for line in log.read_text().splitlines() if "container worker started" in line]
        # When jobsched dev is stopped
        code, seconds = dev.stop(signal.SIGTERM)
    finally:
        dev.kill()
    # Then the container worker stopped with the rest, within the same bound
    assert len(started) == 1 and started[0].startswith("[container] {")
    assert json.loads(started[0].removeprefix("[container] "))["concurrency"] == 2
    assert (code, dev.lines[-1]) == (0, "stopped") and seconds < 5
    assert "container worker stopped" in log.read_text()


def test_the_lambda_time_limit_must_be_a_lambda_timeout(capsys) -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    with pytest.raises(SystemExit):
        parser.parse_args(["--lambda-time-limit", "901"])
    assert "--lambda-time-limit: 901 must be 1..900 seconds" in capsys.readouterr().err
    assert parser.parse_args(["--lambda-time-limit", "3"]).lambda_time_limit == 3


def test_the_fair_share_flag_sets_the_share_and_raises_the_pollers_slots() -> None:
    """Given --fair-share 0.5, then the config's default poller has ceil(20 / 0.5) = 40 slots, one tenant
    holding 20 (JOBSCHED_TENANT_SLOTS); by default 0.8 (25); 1 turns it off (20, no tenant slots)."""
    from jobsched.local.config import LocalConfig

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert parser.parse_args([]).fair_share == 0.8  # on by default (decision 0057)
    assert LocalConfig(fair_share=parser.parse_args([]).fair_share).pool_slots("default") == 25
    assert LocalConfig().fair_share == 0.8 and LocalConfig().tenant_slots()["default"] == 20
    config = LocalConfig(fair_share=parser.parse_args(["--fair-share", "0.5"]).fair_share)
    assert (config.pool_slots("default"), config.tenant_slots()["default"]) == (40, 20)
    assert config.pool_slots("long") == 2  # long has no share
    off = LocalConfig(fair_share=1.0)
    assert (off.pool_slots("default"), off.tenant_slots()) == (20, {})


@pytest.mark.parametrize("value", ["0", "1.5", "x"])
def test_a_bad_fair_share_is_refused_naming_the_flag(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    with pytest.raises(SystemExit):
        parser.parse_args(["--fair-share", value])
    assert "--fair-share must be a number" in capsys.readouterr().err
