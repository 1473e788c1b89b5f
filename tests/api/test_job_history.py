"""``GET /jobs/{id}/history`` (issue 33 §2, decision 0063): a job's run records by scheduled instant,
skipped ones with their reason, the zone's offset changes, the next fires with their DST notes, and a
paused job's resume preview, which is what the resume then does."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta

import pytest

from jobsched.core.models import RunState, Trigger
from jobsched.core.run_records import new_run
from tests.api.conftest import JOB
from tests.api.events import ACME, GLOBEX, body_of
from tests.aws.conftest import T0


def history(call, job_id, headers=ACME, **query):
    response = call("GET", f"/jobs/{job_id}/history", headers=headers, query=query or None)
    assert response["statusCode"] == 200, response["body"]
    return body_of(response)


def test_a_paused_jobs_resume_preview_is_what_the_resume_does(call, create_job, clock):
    # Given an hourly job (its 12:00 run made at creation), paused at 12:10 and still paused at 17:30
    job = create_job(ACME, schedule="0 * * * *")
    clock.advance(minutes=10)
    call("POST", f"/jobs/{job['id']}/pause", headers=ACME)
    clock.set(T0 + timedelta(hours=5, minutes=30))
    # When its history is read
    body = history(call, job["id"])
    # Then the 12:00 run is its one cell, and the preview says what each misfire policy does with the
    # occurrences 13:00..17:00 missed while paused
    assert body["state"] == "paused"
    assert [c["scheduled_at"] for c in body["cells"]] == ["2026-03-02T12:00:00.000Z"]
    preview = {p["policy"]: p for p in body["resume_preview"]}
    assert [p["policy"] for p in body["resume_preview"]] == ["run_once", "run_all", "skip"]
    assert preview["run_once"]["job_default"] is True
    once = preview["run_once"]
    assert once["runs"] == [{"at": "2026-03-02T17:00:00.000Z", "trigger": "catchup"}]
    assert (once["skipped"], once["skipped_first"], once["skipped_last"]) == (
        {"misfire": 4},
        "2026-03-02T13:00:00.000Z",
        "2026-03-02T16:00:00.000Z",
    )
    assert (once["next_at"], once["decided"], once["complete"]) == ("2026-03-02T18:00:00.000Z", 5, True)
    assert [r["at"][11:13] for r in preview["run_all"]["runs"]] == ["13", "14", "15", "16", "17"]
    assert preview["run_all"]["skipped_count"] == 0
    assert (preview["skip"]["runs_count"], preview["skip"]["skipped"]) == (0, {"misfire": 5})
    # and the upcoming fires are the ones after now
    assert body["upcoming"][0]["at"] == "2026-03-02T18:00:00.000Z"
    # When the job is resumed with the run_once policy
    assert call("POST", f"/jobs/{job['id']}/resume", headers=ACME)["statusCode"] == 200
    # Then its history holds exactly what the preview said: 13-16 skipped (misfire), 17:00 caught up
    after = history(call, job["id"])
    cells = [(c["scheduled_at"][11:13], c["state"], c["trigger"], c["skip_reason"]) for c in after["cells"]]
    assert cells == [
        ("12", "queued", "schedule", None),
        ("13", "skipped", "schedule", "misfire"),
        ("14", "skipped", "schedule", "misfire"),
        ("15", "skipped", "schedule", "misfire"),
        ("16", "skipped", "schedule", "misfire"),
        ("17", "queued", "catchup", None),
    ]
    assert after["resume_preview"] is None  # active again


def test_a_long_backlog_is_one_summary_cell_and_a_partial_preview(call, create_job, clock):
    # Given a per-minute job paused for three weeks (30,240 missed occurrences)
    job = create_job(ACME, schedule="* * * * *", misfire_policy="skip")
    call("POST", f"/jobs/{job['id']}/pause", headers=ACME)
    clock.advance(timedelta(days=21))
    # When its history is read
    preview = {p["policy"]: p for p in history(call, job["id"])["resume_preview"]}
    # Then the preview stops after one planner pass (10,000 occurrences) and says so: under run_once
    # the newest of them is kept undecided, as the dispatcher does while more are unread
    assert (preview["skip"]["decided"], preview["skip"]["complete"]) == (10_000, False)
    assert (preview["run_once"]["decided"], preview["run_once"]["runs_count"]) == (9_999, 0)
    assert not preview["run_once"]["complete"]
    assert preview["skip"]["job_default"] is True
    # When it is resumed (skip) and the dispatcher has decided the whole backlog
    call("POST", f"/jobs/{job['id']}/resume", headers=ACME)
    cells = history(call, job["id"])["cells"]
    # Then the skipped occurrences are summary cells with their count and range, not 30,000 cells
    summaries = [c for c in cells if c["skipped_count"]]
    assert summaries and all(c["skip_reason"] == "misfire" for c in summaries)
    assert all(c["skipped_until"] > c["scheduled_at"] for c in summaries)


def test_cells_carry_their_offset_and_the_dst_change_is_marked(call, create_job, clock):
    # Given a daily 12:00 job in Europe/Paris with runs backfilled over the spring change (29 March)
    job = create_job(ACME, schedule="0 12 * * *", timezone="Europe/Paris")
    clock.set(T0 + timedelta(days=31))
    window = {"from": "2026-03-27T00:00:00Z", "to": "2026-03-31T23:00:00Z"}
    assert call("POST", f"/jobs/{job['id']}/backfill", body=window, headers=ACME)["statusCode"] == 201
    # When the history up to 1 April is read
    body = history(call, job["id"], until="2026-04-01T00:00:00Z")
    # Then each cell is at 12:00 local, with the offset of its day, and the change is marked at 01:00Z
    assert [(c["local"][5:16], c["utc_offset_seconds"]) for c in body["cells"]] == [
        ("03-27T12:00", 3600),
        ("03-28T12:00", 3600),
        ("03-29T12:00", 7200),
        ("03-30T12:00", 7200),
        ("03-31T12:00", 7200),
    ]
    assert {c["trigger"] for c in body["cells"]} == {"backfill"}
    assert body["dst_changes"] == [
        {"at": "2026-03-29T01:00:00.000Z", "before_seconds": 3600, "after_seconds": 7200}
    ]
    # and a page that is not the newest has no upcoming fires and no preview
    assert body["upcoming"] == [] and body["resume_preview"] is None


def test_upcoming_fires_carry_the_time_cores_dst_notes(call, create_job):
    # Given a daily 02:30 job in Europe/Paris: 02:30 does not exist on 29 March (spring forward)
    job = create_job(ACME, schedule="30 2 * * *", timezone="Europe/Paris")
    # When its history is read with 30 upcoming fires
    body = history(call, job["id"], upcoming="30")
    # Then the fire of 29 March is shifted to 03:00 local and says so, and the change is marked
    shifted = [f for f in body["upcoming"] if f["note"]]
    assert shifted == [
        {"at": "2026-03-29T01:00:00.000Z", "local": "2026-03-29T03:00:00+02:00", "note": "dst_gap_shifted"}
    ]
    assert [c["at"] for c in body["dst_changes"]] == ["2026-03-29T01:00:00.000Z"]


def test_pages_go_back_through_history(call, create_job, clock):
    # Given an hourly job with five backfilled runs
    job = create_job(ACME, schedule="0 * * * *")
    window = {"from": "2026-03-01T00:00:00Z", "to": "2026-03-01T04:00:00Z"}
    call("POST", f"/jobs/{job['id']}/backfill", body=window, headers=ACME)
    # When the history is read two cells at a time
    first = history(call, job["id"], limit="2")
    second = history(call, job["id"], limit="2", cursor=first["next_cursor"])
    third = history(call, job["id"], limit="2", cursor=second["next_cursor"])
    # Then each page is oldest first within itself and the pages go back in time, none repeated
    hours = [[c["scheduled_at"][8:13] for c in p["cells"]] for p in (first, second, third)]
    assert hours == [["01T04", "02T12"], ["01T02", "01T03"], ["01T00", "01T01"]]
    assert first["upcoming"] and second["upcoming"] == []


def test_another_tenants_job_is_not_found(call, create_job):
    job = create_job(ACME)
    response = call("GET", f"/jobs/{job['id']}/history", headers=GLOBEX)
    assert response["statusCode"] == 404


def test_bad_input_is_a_clear_4xx_naming_the_field(call, create_job):
    job = create_job(ACME)
    cases = [
        ({"until": "2026-03-01T00:00:00"}, 422, "until"),
        ({"until": "yesterday"}, 422, "until"),
        ({"until": "0001-01-01T00:30:00+23:00"}, 422, "until"),
        ({"until": "9999-12-31T23:00:00Z"}, 422, "until"),
        ({"limit": "0"}, 422, "limit"),
        ({"limit": "201"}, 422, "limit"),
        ({"upcoming": "51"}, 422, "upcoming"),
        ({"cursor": "not-a-cursor"}, 400, "cursor"),
    ]
    for query, status, name in cases:
        response = call("GET", f"/jobs/{job['id']}/history", headers=ACME, query=query)
        assert response["statusCode"] == status, (query, response["body"])
        assert name in body_of(response)["message"], (query, response["body"])


@pytest.fixture
def app(aws, clock):
    """The API over ``aws``, its services kept at hand (``app.services``) for the meter and the store."""
    from jobsched.api.app import build_app
    from jobsched.api.auth import AuthConfig, Authenticator
    from jobsched.compose.api import build_services
    from tests.api.events import TOKENS

    environ = {"JOBSCHED_AUTH_MODE": "token", "JOBSCHED_TENANT_TOKENS": json.dumps(TOKENS)}
    services = build_services(aws.settings, aws.clients, clock)
    built = build_app(services, Authenticator(AuthConfig.from_env(environ), services.principals))
    built.services = services  # type: ignore[attr-defined]
    return built


@pytest.mark.units  # asserts read units: the metering adapter over the fakes' DynamoDB client
def test_a_page_reads_the_job_and_its_cells_not_the_history(app, call):
    # Given a job with 1,000 ended runs, one a minute
    services = app.services
    job = services.jobs.create("acme", {**JOB, "schedule": "* * * * *"}, T0)
    store = services.runs.runs
    done = [
        replace(
            new_run(job, T0 - timedelta(minutes=1000 - i), Trigger.SCHEDULE, T0),
            state=RunState.SUCCEEDED,
            finished_at=T0,
        )
        for i in range(1000)
    ]
    store.announce(done)
    for run in done:
        store.put_announced(run)
    meter = store.dynamo.meter
    meter.reset()
    # When the newest page of 100 cells is read
    body = history(call, job.id, limit="100")
    # Then it holds 100 cells and cost the job's read and one Query of 100 run items: a few units,
    # whatever the length of the history
    assert len(body["cells"]) == 100
    reads = meter.snapshot()["dynamodb"]["rcu"]
    print(f"history page of 100 cells: {reads} read units")
    assert reads <= 6


@pytest.mark.parametrize("policy", ["run_once", "run_all", "skip"])
@pytest.mark.parametrize("overlap", ["allow", "skip"])
def test_each_policys_preview_is_what_a_resume_with_it_does(call, create_job, clock, policy, overlap):
    # Given an every-10-minutes job, paused at 12:05 and read at 13:02:30; under overlap skip its 12:00
    # run, still queued, makes the dispatcher skip what would run after it
    job = create_job(ACME, schedule="*/10 * * * *", overlap_policy=overlap)
    clock.advance(minutes=5)
    call("POST", f"/jobs/{job['id']}/pause", headers=ACME)
    clock.set(T0 + timedelta(hours=1, minutes=2, seconds=30))
    preview = {p["policy"]: p for p in history(call, job["id"])["resume_preview"]}[policy]
    # When the job is resumed with that policy
    body = {"misfire_policy": policy}
    assert call("POST", f"/jobs/{job['id']}/resume", body=body, headers=ACME)["statusCode"] == 200
    # Then the records the resume made are the preview's: its runs queued with their triggers, its
    # skipped occurrences recorded with their reasons, nothing else after the 12:00 run
    cells = [c for c in history(call, job["id"])["cells"] if c["scheduled_at"] > "2026-03-02T12:00:00.000Z"]
    runs = [{"at": c["scheduled_at"], "trigger": c["trigger"]} for c in cells if c["state"] != "skipped"]
    skipped: dict[str, int] = {}
    for c in cells:
        if c["state"] == "skipped":
            skipped[c["skip_reason"]] = skipped.get(c["skip_reason"], 0) + (c["skipped_count"] or 1)
    assert (runs, skipped) == (preview["runs"], preview["skipped"])
    assert preview["decided"] == 6  # 12:10 ... 13:00
    expected_runs = {"run_once": 1, "run_all": 6, "skip": 0}[policy] if overlap == "allow" else 0
    assert len(runs) == expected_runs


def test_an_until_after_now_reads_up_to_now(call, create_job):
    # Given a job whose 12:00:30 run is queued ahead at 12:00 (inside the look-ahead)
    job = create_job(ACME, schedule="30 0 12 * * *")
    # When its history is read up to tomorrow
    body = history(call, job["id"], until="2026-03-03T12:00:00Z")
    # Then the page ends now: the queued run is not a cell, it is the first upcoming fire
    assert (body["until"], body["cells"]) == ("2026-03-02T12:00:00.000Z", [])
    assert body["upcoming"][0]["at"] == "2026-03-02T12:00:30.000Z"
