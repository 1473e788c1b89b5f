"""The CLI against the real API: `jobsched dev` (the api function behind the embedded mode's HTTP
bridge, on moto), driven through the real `jobsched` entry point with the tenants' tokens."""

from __future__ import annotations

import json
import uuid

import pytest

from tests.cli.conftest import Embedded

pytestmark = pytest.mark.slow


@pytest.fixture
def as_tenant(cli, embedded: Embedded, monkeypatch: pytest.MonkeyPatch):
    """Run `jobsched ...` as a tenant of the embedded mode (URL and token from the environment)."""

    def run(tenant: str, *argv: str):
        monkeypatch.setenv("JOBSCHED_URL", embedded.url)
        monkeypatch.setenv("JOBSCHED_TOKEN", embedded.tokens[tenant])
        return cli(*argv)

    return run


def _create(as_tenant, tenant: str = "alpha", *extra: str, handler: str = "demo.echo") -> str:
    name = f"cli-{uuid.uuid4().hex[:8]}"
    result = as_tenant(tenant, "jobs", "create", "--name", name, "--schedule", "0 9 * * *", "--handler",
                       handler, "-q", *extra)  # fmt: skip
    assert result.code == 0, result.err
    return result.out.strip()


def test_create_then_get_returns_what_the_flags_said(as_tenant) -> None:
    # Given a job created from flags
    job_id = _create(
        as_tenant, "alpha", "--tz", "Europe/Paris", "--payload", '{"n": 1}', "--priority", "high",
        "--retry-max-attempts", "4", "--dst-gap", "skip",
    )  # fmt: skip
    # When it is read back as JSON
    result = as_tenant("alpha", "jobs", "get", job_id, "--json")
    # Then the API stored every flag, and computed the next five fire times (UTC, Z)
    job = json.loads(result.out)
    assert (job["timezone"], job["payload"], job["priority"], job["dst_gap"]) == (
        "Europe/Paris", {"n": 1}, "high", "skip",
    )  # fmt: skip
    assert job["retry"]["max_attempts"] == 4
    assert job["state"] == "active" and job["target"] == {"handler": "demo.echo"}
    assert len(job["next_fire_times"]) == 5 and all(t.endswith("Z") for t in job["next_fire_times"])
    assert all(t[11:16] in ("08:00", "07:00") for t in job["next_fire_times"])  # 09:00 Paris


def test_list_pages_with_limit_and_all_follows_the_api_cursors(as_tenant) -> None:
    # Given three jobs of one tenant
    created = {_create(as_tenant, "beta") for _ in range(3)}
    # When the first page of two is listed, Then it has two rows and a hint with the next cursor
    first = as_tenant("beta", "jobs", "list", "--limit", "2")
    assert len(first.out.splitlines()) == 3  # header + 2
    assert "--cursor " in first.err
    cursor = first.err.split("--cursor ")[1].split()[0]
    # And the cursor gives the next page
    rest = json.loads(as_tenant("beta", "jobs", "list", "--limit", "2", "--cursor", cursor, "--json").out)
    assert rest["items"]
    # And --all returns every job, newest first, in one list
    everything = json.loads(as_tenant("beta", "jobs", "list", "--limit", "2", "--all", "--json").out)
    ids = [job["id"] for job in everything["items"]]
    assert created <= set(ids) and len(ids) == len(set(ids))
    assert everything["next_cursor"] is None


def test_an_invalid_schedule_is_refused_with_the_api_message(as_tenant) -> None:
    result = as_tenant("alpha", "jobs", "create", "--name", "bad", "--schedule", "61 * * * *", "--handler",
                       "demo.echo")  # fmt: skip
    assert result.code == 1
    assert result.err.startswith("error: validation_error: ")
    assert "61" in result.err or "minute" in result.err


def test_a_wrong_token_is_unauthorized(cli, embedded: Embedded) -> None:
    result = cli("jobs", "list", "--url", embedded.url, "--token", "not-a-token")
    assert (result.code, result.err.split(":")[:2]) == (1, ["error", " unauthorized"])


def test_another_tenants_job_is_not_found(as_tenant) -> None:
    job_id = _create(as_tenant, "alpha")
    result = as_tenant("beta", "jobs", "get", job_id)
    assert result.code == 1
    assert result.err.startswith("error: not_found: ")


def test_pause_and_resume_change_the_state(as_tenant) -> None:
    job_id = _create(as_tenant, "alpha")
    paused = json.loads(as_tenant("alpha", "jobs", "pause", job_id, "--note", "maint", "--json").out)
    resumed = json.loads(
        as_tenant("alpha", "jobs", "resume", job_id, "--misfire-policy", "skip", "--json").out
    )
    assert (paused["state"], resumed["state"]) == ("paused", "active")
    assert resumed["version"] > paused["version"]


def test_delete_with_a_stale_version_is_refused_then_deletes_the_current_one(as_tenant) -> None:
    # Given a job at some version
    job_id = _create(as_tenant, "alpha")
    version = json.loads(as_tenant("alpha", "jobs", "get", job_id, "--json").out)["version"]
    # When it is deleted with a stale version, Then the API refuses with 412 and the job stays
    stale = as_tenant("alpha", "jobs", "delete", job_id, "--if-match", str(version + 7))
    assert (stale.code, stale.err.split(":")[1].strip()) == (1, "precondition_failed")
    assert as_tenant("alpha", "jobs", "get", job_id).code == 0
    # When it is deleted without --if-match, Then the current version goes and the job is gone
    assert as_tenant("alpha", "jobs", "delete", job_id).code == 0
    gone = as_tenant("alpha", "jobs", "get", job_id)
    assert (gone.code, gone.err.split(":")[1].strip()) == (1, "not_found")


def test_an_unknown_run_and_dead_letter_are_not_found(as_tenant) -> None:
    for argv in (("runs", "get", "nope"), ("runs", "cancel", "nope"), ("dlq", "discard", "nope")):
        result = as_tenant("alpha", *argv)
        assert result.code == 1, argv
        assert result.err.split(":")[1].strip() in ("not_found", "validation_error"), result.err


def test_trigger_creates_a_run_that_lists_under_its_job(as_tenant) -> None:
    job_id = _create(as_tenant, "alpha")
    run_id = as_tenant("alpha", "jobs", "trigger", job_id, "-q").out.strip()
    listed = as_tenant("alpha", "runs", "list", "--job", job_id, "-q").out.split()
    run = json.loads(as_tenant("alpha", "runs", "get", run_id, "--json").out)
    assert run_id in listed
    assert run["job_id"] == job_id


def test_dead_letters_list_by_filter_and_replay_by_filter(as_tenant) -> None:
    # Given two runs of a permanently failing job, finished
    job_id = _create(as_tenant, "beta", "--payload", '{"kind": "permanent"}', handler="demo.fail")
    runs = {as_tenant("beta", "jobs", "trigger", job_id, "-q").out.strip() for _ in range(2)}
    for run_id in runs:
        watched = as_tenant("beta", "runs", "watch", run_id, "--timeout", "60", "--interval", "0.2")
        assert (watched.code, watched.err.split(":")[1].strip()) == (1, "run_failed"), watched.err
    # When the dead letters are listed by job and reason, Then both are there
    listed = as_tenant("beta", "dlq", "list", "--job", job_id, "--reason", "permanent", "-q").out.split()
    assert set(listed) == runs
    # When they are replayed by filter, Then both are replayed, and come back (demo.fail fails again)
    replayed = as_tenant("beta", "dlq", "replay", "--job", job_id)
    assert replayed.out.strip() == f"replayed 2 dead letter(s) of job {job_id}"
    for run_id in runs:
        watched = as_tenant("beta", "runs", "watch", run_id, "--timeout", "60", "--interval", "0.2")
        assert (watched.code, watched.err.split(":")[1].strip()) == (1, "run_failed"), watched.err
    again = json.loads(as_tenant("beta", "dlq", "list", "--job", job_id, "--json").out)["items"]
    assert {item["run_id"] for item in again} == runs
    assert all(len(item["replays"]) == 1 for item in again)
    # When they are discarded, Then none are left
    for run_id in runs:
        assert as_tenant("beta", "dlq", "discard", run_id).code == 0
    assert as_tenant("beta", "dlq", "list", "--job", job_id).out.strip() == "no dead letters"


def test_watch_a_job_follows_its_next_run_to_the_end(as_tenant) -> None:
    # Given a job that fires every 2 seconds
    job_id = _create(as_tenant, "alpha", "--schedule", "*/2 * * * * *")
    try:
        # When its runs are watched
        result = as_tenant("alpha", "runs", "watch", "--job", job_id, "--timeout", "60", "--interval", "0.2")
    finally:
        as_tenant("alpha", "jobs", "pause", job_id)
    # Then the watch saw at least one of its runs succeed, and ended with exit 0
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert any(line.split()[1] == "succeeded" and line.split()[2].startswith(job_id) for line in lines), lines
