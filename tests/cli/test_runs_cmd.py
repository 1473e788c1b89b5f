"""`jobsched runs ...` against a contract server, and `runs watch` under a fake clock."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta

from jobsched.cli.client import ApiClient
from jobsched.cli.commands.runs import RunWatcher
from tests.cli.conftest import ContractServer, run_body

RUN_ID = "job-0001.20261201T090000Z"


def test_list_passes_the_filters_as_query_parameters(cli, cli_env: ContractServer) -> None:
    cli_env.respond("GET", "/runs", 200, {"items": [run_body()], "next_cursor": None})
    result = cli("runs", "list", "--job", "job-0001", "--state", "failed", "--since", "2026-12-01T00:00:00Z")
    assert cli_env.only("GET", "/runs").query == {
        "job_id": ["job-0001"],
        "state": ["failed"],
        "since": ["2026-12-01T00:00:00Z"],
    }
    assert result.code == 0


def test_list_table_shows_times_without_subseconds_and_the_skip_reason(cli, cli_env: ContractServer) -> None:
    skipped = run_body(id="r2", state="skipped", started_at=None, finished_at=None, skip_reason="paused")
    cli_env.respond("GET", "/runs", 200, {"items": [run_body(), skipped], "next_cursor": None})
    lines = cli("runs", "list").out.splitlines()
    assert lines[0].split() == ["ID", "JOB", "STATE", "SCHEDULED", "STARTED", "FINISHED", "ATT", "NOTE"]
    assert lines[1].split() == [
        RUN_ID, "job-0001", "succeeded", "2026-12-01T09:00:00Z", "2026-12-01T09:00:00Z",
        "2026-12-01T09:00:00Z", "1", "-",
    ]  # fmt: skip
    assert lines[2].split()[-1] == "paused" and lines[2].split()[2] == "skipped"


def test_get_shows_the_run_and_its_attempt_history(cli, cli_env: ContractServer) -> None:
    run = run_body(
        state="failed",
        attempt=2,
        error="boom",
        attempts=[
            {"attempt": 1, "started_at": "2026-12-01T09:00:00Z", "finished_at": "2026-12-01T09:00:01Z",
             "outcome": "retried", "error": "timeout"},
            {"attempt": 2, "started_at": "2026-12-01T09:00:05Z", "finished_at": "2026-12-01T09:00:06Z",
             "outcome": "failed", "error": "boom"},
        ],
    )  # fmt: skip
    cli_env.respond("GET", f"/runs/{RUN_ID}", 200, run)
    out = cli("runs", "get", RUN_ID).out
    assert "state:" in out and "failed" in out
    attempts = out.split("\n\n")[1].splitlines()
    assert attempts[0].split() == ["ATTEMPT", "STARTED", "FINISHED", "HANDLER", "CODE", "OUTCOME", "ERROR"]
    assert attempts[1].split()[-2:] == ["retried", "timeout"]
    assert attempts[2].split()[-2:] == ["failed", "boom"]


def test_get_shows_what_ran_each_attempt(cli, cli_env: ContractServer) -> None:
    # Given a run bound to report@1 whose attempts ran on two deployments (decision 0048)
    ran = {"handler": "report", "handler_version": 1}
    run = run_body(
        state="succeeded",
        attempt=2,
        **ran,
        attempts=[
            {"attempt": 1, "started_at": "2026-12-01T09:00:00Z", "finished_at": "2026-12-01T09:00:01Z",
             "outcome": "retrying", "error": "timeout", **ran, "code_version": "a1b2c3d4e5f6"},
            {"attempt": 2, "started_at": "2026-12-01T09:00:05Z", "finished_at": "2026-12-01T09:00:06Z",
             "outcome": "succeeded", **ran, "code_version": "0f9e8d7c6b5a"},
        ],
    )  # fmt: skip
    cli_env.respond("GET", f"/runs/{RUN_ID}", 200, run)
    # When it is shown
    fields, table = cli("runs", "get", RUN_ID).out.split("\n\n")
    # Then the run names its handler@version, and each attempt the handler@version and code version
    assert "handler:" in fields and "report@1" in fields
    rows = [line.split() for line in table.splitlines()[1:]]
    assert [row[3:6] for row in rows] == [
        ["report@1", "a1b2c3d4e5f6", "retrying"],
        ["report@1", "0f9e8d7c6b5a", "succeeded"],
    ]


def test_get_json_prints_the_api_document_unchanged(cli, cli_env: ContractServer) -> None:
    cli_env.respond("GET", f"/runs/{RUN_ID}", 200, run_body())
    assert json.loads(cli("runs", "get", RUN_ID, "--json").out) == run_body()


def test_cancel_posts_to_the_run(cli, cli_env: ContractServer) -> None:
    cli_env.respond("POST", f"/runs/{RUN_ID}/cancel", 200, run_body(state="cancelled"))
    result = cli("runs", "cancel", RUN_ID)
    cli_env.only("POST", f"/runs/{RUN_ID}/cancel")
    assert result.code == 0 and "cancelled" in result.out


def test_retry_of_a_run_that_is_not_failed_reports_the_conflict(cli, cli_env: ContractServer) -> None:
    cli_env.respond(
        "POST", f"/runs/{RUN_ID}/retry", 409, {"error": "conflict", "message": "run is succeeded"}
    )
    result = cli("runs", "retry", RUN_ID)
    assert (result.code, result.err.strip()) == (1, "error: conflict: run is succeeded")


def test_watch_needs_a_run_or_a_job(cli, cli_env: ContractServer) -> None:
    result = cli("runs", "watch")
    assert result.code == 2
    assert cli_env.requests == []


class FakeClock:
    """monotonic() and sleep() that only move when slept: no wall clock, no waiting."""

    def __init__(self) -> None:
        self.t = 0.0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.t += seconds

    def now(self) -> datetime:
        return datetime(2026, 12, 1, 9, 0, 0, tzinfo=UTC) + timedelta(seconds=self.t)


def _watcher(api: ContractServer, clock: FakeClock, **kwargs) -> tuple[RunWatcher, io.StringIO]:
    out = io.StringIO()
    watcher = RunWatcher(
        ApiClient(api.url), out=out, sleep=clock.sleep, monotonic=clock.monotonic, now=clock.now, **kwargs
    )
    return watcher, out


def test_watch_prints_each_transition_once_and_ends_at_a_terminal_state(api: ContractServer) -> None:
    # Given a run seen queued twice, then running, then succeeded
    for state in ("queued", "queued", "running", "succeeded"):
        api.respond("GET", f"/runs/{RUN_ID}", 200, run_body(state=state))
    clock = FakeClock()
    watcher, out = _watcher(api, clock, run_id=RUN_ID)
    # When it is watched
    code = watcher.watch(timeout=60, interval=2)
    # Then one line per transition, with the observation time, and exit 0
    lines = out.getvalue().splitlines()
    assert [line.split()[1] for line in lines] == ["queued", "running", "succeeded"]
    assert [line.split()[0] for line in lines] == ["09:00:00", "09:00:04", "09:00:06"]
    assert code == 0
    assert clock.sleeps == [2, 2, 2]


def test_watch_exits_1_when_the_run_fails_and_shows_the_error(api: ContractServer, capsys) -> None:
    api.respond("GET", f"/runs/{RUN_ID}", 200, run_body(state="running"))
    api.respond("GET", f"/runs/{RUN_ID}", 200, run_body(state="failed", attempt=3, error="boom"))
    watcher, out = _watcher(api, FakeClock(), run_id=RUN_ID)
    assert watcher.watch(timeout=60, interval=1) == 1
    assert out.getvalue().splitlines()[-1].split()[1:] == ["failed", RUN_ID, "attempt", "3", "boom"]
    assert capsys.readouterr().err.strip() == f"error: run_failed: 1 run(s) failed: {RUN_ID}"


def test_watch_gives_up_at_the_timeout(api: ContractServer, capsys) -> None:
    api.respond("GET", f"/runs/{RUN_ID}", 200, run_body(state="running"))
    clock = FakeClock()
    watcher, _ = _watcher(api, clock, run_id=RUN_ID)
    assert watcher.watch(timeout=10, interval=3) == 1
    assert clock.t <= 10
    assert capsys.readouterr().err.strip() == f"error: timeout: {RUN_ID} not finished after 10s"


def test_watch_of_a_job_ignores_finished_history_and_follows_the_next_run(api: ContractServer) -> None:
    # Given a job with one old finished run; then a new run appears and succeeds
    old = run_body(id="old", state="succeeded")
    pages = [
        [old],
        [run_body(id="new", state="queued"), old],
        [run_body(id="new", state="succeeded"), old],
    ]
    for items in pages:
        api.respond("GET", "/runs", 200, {"items": items, "next_cursor": None})
    watcher, out = _watcher(api, FakeClock(), job_id="job-0001")
    # When the job's runs are watched
    code = watcher.watch(timeout=60, interval=1)
    # Then only the new run's transitions are printed, and it ends when that run finished
    assert [line.split()[1:3] for line in out.getvalue().splitlines()] == [
        ["queued", "new"],
        ["succeeded", "new"],
    ]
    assert code == 0
    assert api.requests[0].query == {
        "job_id": ["job-0001"],
        "since": ["2026-12-01T08:59:00Z"],
        "limit": ["200"],
    }


def test_watch_of_a_job_reports_a_next_run_that_fell_due_and_ended_between_two_polls(
    api: ContractServer,
) -> None:
    # Given a job with one old finished run; then, by the next poll, a run scheduled after the watch
    # started has already run and succeeded (a short run between two polls)
    old = run_body(id="old", state="succeeded")
    quick = run_body(
        id="quick",
        state="succeeded",
        scheduled_at="2026-12-01T09:00:00.500Z",
        attempts=[
            {
                "attempt": 1,
                "started_at": "2026-12-01T09:00:00.510Z",
                "finished_at": "2026-12-01T09:00:00.530Z",
                "outcome": "succeeded",
            }
        ],
    )
    for items in ([old], [quick, old]):
        api.respond("GET", "/runs", 200, {"items": items, "next_cursor": None})
    watcher, out = _watcher(api, FakeClock(), job_id="job-0001")
    # When the job's runs are watched
    code = watcher.watch(timeout=60, interval=1)
    # Then that run is the one followed: its history and its end are printed, and the watch ends
    assert [line.split()[1:3] for line in out.getvalue().splitlines()] == [
        ["queued", "quick"],
        ["running", "quick"],
        ["succeeded", "quick"],
    ]
    assert code == 0


def test_watch_of_a_job_leaves_runs_queued_ahead_alone_until_they_fall_due(api: ContractServer) -> None:
    # Given a due run that succeeds, and a run queued ahead for 09:00:30 that stays queued
    ahead = run_body(id="ahead", state="queued", scheduled_at="2026-12-01T09:00:30Z")
    api.respond(
        "GET", "/runs", 200, {"items": [ahead, run_body(id="due", state="running")], "next_cursor": None}
    )
    api.respond(
        "GET", "/runs", 200, {"items": [ahead, run_body(id="due", state="succeeded")], "next_cursor": None}
    )
    watcher, out = _watcher(api, FakeClock(), job_id="job-0001")
    # When the job is watched
    code = watcher.watch(timeout=20, interval=1)
    # Then only the due run is followed, and the watch ends when it finished (at 09:00:01)
    assert [line.split()[1:3] for line in out.getvalue().splitlines()] == [
        ["running", "due"],
        ["succeeded", "due"],
    ]
    assert code == 0


def test_watch_of_a_job_reads_every_page(api: ContractServer) -> None:
    api.respond("GET", "/runs", 200, {"items": [run_body(id="b", state="succeeded")], "next_cursor": "p2"})
    api.respond("GET", "/runs", 200, {"items": [run_body(id="a", state="running")], "next_cursor": None})
    api.respond("GET", "/runs", 200, {"items": [run_body(id="b", state="succeeded")], "next_cursor": "p2"})
    api.respond("GET", "/runs", 200, {"items": [run_body(id="a", state="succeeded")], "next_cursor": None})
    watcher, out = _watcher(api, FakeClock(), job_id="job-0001")
    assert watcher.watch(timeout=20, interval=1) == 0
    assert [line.split()[1:3] for line in out.getvalue().splitlines()] == [
        ["running", "a"],
        ["succeeded", "a"],
    ]


def test_watch_json_prints_one_object_per_line(api: ContractServer) -> None:
    api.respond("GET", f"/runs/{RUN_ID}", 200, run_body(state="running"))
    api.respond("GET", f"/runs/{RUN_ID}", 200, run_body(state="succeeded"))
    watcher, out = _watcher(api, FakeClock(), run_id=RUN_ID, as_json=True)
    watcher.watch(timeout=60, interval=1)
    events = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(e["state"], e["at"]) for e in events] == [
        ("running", "2026-12-01T09:00:00+00:00"),
        ("succeeded", "2026-12-01T09:00:01+00:00"),
    ]


def test_watch_command_runs_end_to_end_through_the_cli(cli, cli_env: ContractServer) -> None:
    cli_env.respond("GET", f"/runs/{RUN_ID}", 200, run_body(state="succeeded"))
    result = cli("runs", "watch", RUN_ID, "--timeout", "5", "--interval", "0.01")
    assert result.code == 0
    assert result.out.splitlines()[-1].split()[1:3] == ["succeeded", RUN_ID]


def test_watch_of_a_finished_run_prints_its_history_at_the_recorded_instants(api: ContractServer) -> None:
    """Given a run that failed once, was retried and succeeded, before the watch began
    When it is watched
    Then every transition is printed, each at the instant of the run record, ending with success"""
    attempts = [
        {"attempt": 1, "started_at": "2026-12-01T08:00:01.100Z", "finished_at": "2026-12-01T08:00:02.000Z",
         "outcome": "retried", "error": "timeout"},
        {"attempt": 2, "started_at": "2026-12-01T08:00:05.000Z", "finished_at": "2026-12-01T08:00:06.500Z",
         "outcome": "succeeded", "error": None},
    ]  # fmt: skip
    done = run_body(
        state="succeeded",
        scheduled_at="2026-12-01T08:00:00Z",
        finished_at="2026-12-01T08:00:06.500Z",
        attempt=2,
        attempts=attempts,
    )
    api.respond("GET", f"/runs/{RUN_ID}", 200, done)
    watcher, out = _watcher(api, FakeClock(), run_id=RUN_ID)
    code = watcher.watch(timeout=60, interval=1)
    assert code == 0
    assert [line.split()[:2] for line in out.getvalue().splitlines()] == [
        ["08:00:00", "queued"],
        ["08:00:01", "running"],
        ["08:00:02", "retrying"],
        ["08:00:05", "running"],
        ["08:00:06", "succeeded"],
    ]
    assert out.getvalue().splitlines()[2].split()[-1] == "timeout"


def test_watch_of_a_skipped_run_prints_one_line() -> None:
    """Given a run recorded skipped (it never ran), When watched, Then only its end is printed."""
    out = io.StringIO()
    watcher = RunWatcher(None, run_id="r", out=out, now=FakeClock().now)  # type: ignore[arg-type]
    watcher._history(run_body(id="r", state="skipped", skip_reason="paused", attempts=[]))
    watcher._observe(run_body(id="r", state="skipped", skip_reason="paused", attempts=[]))
    assert [line.split()[1:] for line in out.getvalue().splitlines()] == [
        ["skipped", "r", "attempt", "1", "paused"]
    ]


def test_watch_help_shows_its_defaults(cli) -> None:
    result = cli("runs", "watch", "--help")
    assert "give up after (default 300)" in result.out
    assert "poll period (default 1)" in result.out


def test_watch_of_a_busy_job_ends_when_the_runs_it_waits_for_end(api: ContractServer) -> None:
    # Given a frequent job: each poll shows the previous run done and a new one due and queued
    for n in range(1, 6):
        items = [run_body(id=f"r{n}", state="queued"), run_body(id=f"r{n - 1}", state="succeeded")]
        api.respond("GET", "/runs", 200, {"items": items, "next_cursor": None})
    watcher, out = _watcher(api, FakeClock(), job_id="job-0001")
    # When it is watched, Then it follows r1 (under way at the start) to its end, not the runs after it
    assert watcher.watch(timeout=20, interval=1) == 0
    lines = out.getvalue().splitlines()
    assert [line.split()[1:3] for line in lines] == [["queued", "r1"], ["succeeded", "r1"]]
