"""/jobs contract: events in, responses out, against the in-memory tables and queues."""

from __future__ import annotations

from tests.api.conftest import JOB
from tests.api.events import ACME, body_of

# --- create ---------------------------------------------------------------------------------------


def test_create_answers_201_with_the_job_defaults_and_next_fire_times(call):
    # Given the clock at 2026-03-02T12:00Z
    # When a daily 03:00 UTC job is created with only the required fields
    response = call("POST", "/jobs", body=JOB, headers=ACME)
    # Then 201, a Location, every field with its default, and the next five fires
    assert response["statusCode"] == 201
    job = body_of(response)
    assert response["headers"]["Location"] == f"/jobs/{job['id']}"
    assert (job["state"], job["version"], job["timezone"], job["priority"]) == ("active", 1, "UTC", "default")
    assert job["retry"] == {"max_attempts": 3, "base_seconds": 2.0, "max_seconds": 300.0}
    assert (job["misfire_policy"], job["overlap_policy"], job["dst_gap"], job["dst_overlap"]) == (
        "run_once",
        "allow",
        "shift",
        "first",
    )
    assert job["next_fire_times"] == [f"2026-03-0{d}T03:00:00.000Z" for d in range(3, 8)]
    assert job["created_at"] == "2026-03-02T12:00:00.000Z"


def test_create_with_an_http_target_keeps_it(call):
    target = {"http": {"url": "https://example.com/hook", "method": "PUT", "headers": {"X-A": "1"}}}
    job = body_of(call("POST", "/jobs", body={**JOB, "target": target}, headers=ACME))
    assert job["target"] == {
        "http": {"url": "https://example.com/hook", "method": "PUT", "headers": {"X-A": "1"}}
    }


def test_unknown_handler_is_422_and_writes_nothing(call):
    response = call("POST", "/jobs", body={**JOB, "target": {"handler": "no.such"}}, headers=ACME)
    assert response["statusCode"] == 422
    assert "no.such" in body_of(response)["message"]
    assert body_of(call("GET", "/jobs", headers=ACME))["items"] == []


def test_invalid_cron_is_422_naming_the_problem(call):
    response = call("POST", "/jobs", body={**JOB, "schedule": "0 25 * * *"}, headers=ACME)
    assert response["statusCode"] == 422
    assert "25" in body_of(response)["message"]


def test_target_with_both_kinds_is_422(call):
    target = {"handler": "demo.echo", "http": {"url": "https://example.com"}}
    response = call("POST", "/jobs", body={**JOB, "target": target}, headers=ACME)
    assert response["statusCode"] == 422
    assert body_of(response)["message"].startswith("target: give exactly one of")


def test_payload_over_the_job_limit_is_413(call):
    response = call("POST", "/jobs", body={**JOB, "payload": {"blob": "x" * 70_000}}, headers=ACME)
    assert response["statusCode"] == 413
    assert body_of(response)["error"] == "payload_too_large"
    assert body_of(call("GET", "/jobs", headers=ACME))["items"] == []


def test_one_off_job_in_the_past_is_422(call):
    response = call("POST", "/jobs", body={**JOB, "schedule": "at(2020-01-01T00:00:00)"}, headers=ACME)
    assert response["statusCode"] == 422
    assert body_of(response)["message"].startswith("schedule ")


# --- read, list -----------------------------------------------------------------------------------


def test_get_returns_the_created_job(call, create_job):
    job = create_job(ACME)
    response = call("GET", f"/jobs/{job['id']}", headers=ACME)
    assert response["statusCode"] == 200
    assert body_of(response) == job


def test_get_of_an_impossible_id_is_404(call):
    response = call("GET", "/jobs/" + "x" * 300, headers=ACME)
    assert response["statusCode"] == 404


def test_list_pages_with_an_opaque_cursor(call, create_job):
    # Given three jobs
    ids = {create_job(ACME, name=f"job {i}")["id"] for i in range(3)}
    # When they are listed two at a time
    first = body_of(call("GET", "/jobs", query={"limit": "2"}, headers=ACME))
    second = body_of(call("GET", "/jobs", query={"limit": "2", "cursor": first["next_cursor"]}, headers=ACME))
    # Then the two pages hold all three, once each, and the second page is the last
    assert len(first["items"]) == 2 and first["next_cursor"]
    assert {j["id"] for j in first["items"] + second["items"]} == ids
    assert len(second["items"]) == 1


def test_list_limit_over_200_is_422(call):
    response = call("GET", "/jobs", query={"limit": "201"}, headers=ACME)
    assert response["statusCode"] == 422
    assert body_of(response)["message"] == "limit: Input should be less than or equal to 200"


def test_tampered_cursor_is_400(call):
    response = call("GET", "/jobs", query={"cursor": "eyJ2IjoxfQ"}, headers=ACME)
    assert response["statusCode"] == 400


# --- update, delete -------------------------------------------------------------------------------


def test_patch_with_the_current_version_changes_the_job(call, create_job):
    job = create_job(ACME)
    response = call(
        "PATCH", f"/jobs/{job['id']}", body={"schedule": "0 4 * * *"}, headers={**ACME, "If-Match": '"1"'}
    )
    assert response["statusCode"] == 200
    changed = body_of(response)
    assert (changed["version"], changed["schedule"]) == (2, "0 4 * * *")
    assert changed["next_fire_times"][0] == "2026-03-03T04:00:00.000Z"


def test_patch_with_a_stale_version_is_412_and_changes_nothing(call, create_job):
    job = create_job(ACME)
    call("PATCH", f"/jobs/{job['id']}", body={"name": "v2"}, headers={**ACME, "If-Match": "1"})
    response = call("PATCH", f"/jobs/{job['id']}", body={"name": "v3"}, headers={**ACME, "If-Match": "1"})
    assert response["statusCode"] == 412
    assert body_of(call("GET", f"/jobs/{job['id']}", headers=ACME))["name"] == "v2"


def test_patch_without_if_match_is_428(call, create_job):
    job = create_job(ACME)
    response = call("PATCH", f"/jobs/{job['id']}", body={"name": "v2"}, headers=ACME)
    assert response["statusCode"] == 428
    assert body_of(response)["error"] == "precondition_required"


def test_patch_with_an_invalid_schedule_is_422_and_keeps_the_version(call, create_job):
    job = create_job(ACME)
    response = call(
        "PATCH", f"/jobs/{job['id']}", body={"schedule": "nope"}, headers={**ACME, "If-Match": "1"}
    )
    assert response["statusCode"] == 422
    assert body_of(call("GET", f"/jobs/{job['id']}", headers=ACME))["version"] == 1


def test_patch_with_null_is_422(call, create_job):
    job = create_job(ACME)
    response = call("PATCH", f"/jobs/{job['id']}", body={"schedule": None}, headers={**ACME, "If-Match": "1"})
    assert response["statusCode"] == 422


def test_delete_with_a_stale_version_is_412_then_current_deletes(call, create_job):
    job = create_job(ACME)
    stale = call("DELETE", f"/jobs/{job['id']}", headers={**ACME, "If-Match": "7"})
    assert stale["statusCode"] == 412
    deleted = call("DELETE", f"/jobs/{job['id']}", headers={**ACME, "If-Match": "1"})
    assert deleted["statusCode"] == 200
    assert body_of(deleted) == {"id": job["id"], "deleted": True, "withdrawn_runs": []}
    assert call("GET", f"/jobs/{job['id']}", headers=ACME)["statusCode"] == 404


# --- lifecycle ------------------------------------------------------------------------------------


def test_pause_withdraws_runs_queued_ahead_and_records_them_skipped(call, create_job):
    # Given a job whose next fire (12:00:30) is inside the look-ahead, so its run is queued ahead
    job = create_job(ACME, schedule="30 0 12 * * *")
    assert body_of(call("GET", f"/jobs/{job['id']}/runs", headers=ACME))["items"] == []  # no history yet
    upcoming = call("GET", f"/jobs/{job['id']}/runs", query={"upcoming": "true"}, headers=ACME)
    queued = body_of(upcoming)["items"]
    assert [r["state"] for r in queued] == ["queued"]
    # When the job is paused with a note
    response = call("POST", f"/jobs/{job['id']}/pause", body={"note": "maintenance"}, headers=ACME)
    # Then it is paused, fires nothing, and the queued run is skipped with reason paused
    paused = body_of(response)
    assert (paused["state"], paused["paused_note"], paused["next_fire_times"]) == (
        "paused",
        "maintenance",
        [],
    )
    assert paused["withdrawn_runs"] == [queued[0]["id"]]
    run = body_of(call("GET", f"/runs/{queued[0]['id']}", headers=ACME))
    assert (run["state"], run["skip_reason"]) == ("skipped", "paused")


def test_pausing_a_paused_job_is_409(call, create_job):
    job = create_job(ACME)
    call("POST", f"/jobs/{job['id']}/pause", headers=ACME)
    response = call("POST", f"/jobs/{job['id']}/pause", headers=ACME)
    assert response["statusCode"] == 409


def test_resume_with_a_misfire_override(call, create_job):
    job = create_job(ACME)
    call("POST", f"/jobs/{job['id']}/pause", headers=ACME)
    response = call("POST", f"/jobs/{job['id']}/resume", body={"misfire_policy": "skip"}, headers=ACME)
    assert response["statusCode"] == 200
    assert body_of(response)["state"] == "active"


def test_resume_with_an_unknown_policy_is_422(call, create_job):
    job = create_job(ACME)
    call("POST", f"/jobs/{job['id']}/pause", headers=ACME)
    response = call("POST", f"/jobs/{job['id']}/resume", body={"misfire_policy": "sometimes"}, headers=ACME)
    assert response["statusCode"] == 422
    assert body_of(response)["message"].startswith("misfire_policy: ")


def test_trigger_creates_a_manual_run_now(call, create_job):
    job = create_job(ACME)
    response = call("POST", f"/jobs/{job['id']}/trigger", body={}, headers=ACME)
    assert response["statusCode"] == 201
    run = body_of(response)
    assert (run["job_id"], run["state"], run["trigger"]) == (job["id"], "queued", "manual")
    assert run["scheduled_at"] == "2026-03-02T12:00:00.000Z"


def test_trigger_with_the_same_idempotency_key_reuses_the_run(call, create_job):
    job = create_job(ACME)
    headers = {**ACME, "Idempotency-Key": "deploy-42"}
    first = body_of(call("POST", f"/jobs/{job['id']}/trigger", headers=headers))
    again = body_of(call("POST", f"/jobs/{job['id']}/trigger", headers=headers))
    assert first["id"] == again["id"]
    assert len(body_of(call("GET", f"/jobs/{job['id']}/runs", headers=ACME))["items"]) == 1


def test_backfill_creates_one_run_per_occurrence_in_the_range(call, create_job):
    job = create_job(ACME, schedule="0 * * * *")
    window = {"from": "2026-03-01T00:00:00Z", "to": "2026-03-01T02:00:00Z"}
    response = call("POST", f"/jobs/{job['id']}/backfill", body=window, headers=ACME)
    assert response["statusCode"] == 201
    runs = body_of(response)["runs"]
    assert [r["scheduled_at"] for r in runs] == [f"2026-03-01T0{h}:00:00.000Z" for h in range(3)]
    assert {r["trigger"] for r in runs} == {"backfill"}


def test_backfill_with_from_after_to_is_422(call, create_job):
    job = create_job(ACME)
    window = {"from": "2026-03-02T00:00:00Z", "to": "2026-03-01T00:00:00Z"}
    response = call("POST", f"/jobs/{job['id']}/backfill", body=window, headers=ACME)
    assert response["statusCode"] == 422


def test_job_runs_are_listed_newest_first(call, create_job):
    job = create_job(ACME, schedule="0 * * * *")
    window = {"from": "2026-03-01T00:00:00Z", "to": "2026-03-01T02:00:00Z"}
    call("POST", f"/jobs/{job['id']}/backfill", body=window, headers=ACME)
    runs = body_of(call("GET", f"/jobs/{job['id']}/runs", headers=ACME))["items"]
    # (the 12:00 run was dispatched at creation: it is due now)
    assert [r["scheduled_at"][:13] for r in runs] == [
        "2026-03-02T12",
        "2026-03-01T02",
        "2026-03-01T01",
        "2026-03-01T00",
    ]


def test_jobs_are_listed_newest_first(call, create_job, clock):
    # Given three jobs created a second apart
    created = []
    for i in range(3):
        created.append(create_job(ACME, name=f"job {i}")["id"])
        clock.advance(1)
    # When the jobs are listed
    listed = [j["id"] for j in body_of(call("GET", "/jobs", headers=ACME))["items"]]
    # Then the newest comes first
    assert listed == list(reversed(created))


def test_job_ids_sort_newest_first_and_stay_url_safe():
    from datetime import UTC, datetime, timedelta

    from jobsched.compose.api import newest_first_job_id
    from jobsched.core.models import validate_job_id

    t0 = datetime(2026, 3, 2, 12, tzinfo=UTC)
    ids = [newest_first_job_id(t0 + timedelta(milliseconds=ms)) for ms in (0, 1, 1000, 86_400_000)]
    assert ids == sorted(ids, reverse=True)
    assert all(validate_job_id(i) == i and "." not in i for i in ids)


def test_get_and_patch_answer_the_version_as_etag(call, create_job):
    job = create_job(ACME)
    read = call("GET", f"/jobs/{job['id']}", headers=ACME)
    assert read["headers"]["ETag"] == '"1"'
    patched = call(
        "PATCH",
        f"/jobs/{job['id']}",
        body={"name": "v2"},
        headers={**ACME, "If-Match": read["headers"]["ETag"]},
    )
    assert patched["headers"]["ETag"] == '"2"'
