"""/runs and /dead-letters contract: runs made through the API, executed by a real worker, on the
in-memory fakes."""

from __future__ import annotations

import pytest

from jobsched.core.ids import parse_run_id
from tests.api.events import ACME, body_of

FAILING = {"target": {"handler": "demo.fail"}, "payload": {"kind": "permanent", "message": "bad input"}}


def _failed_run(call, create_job, work_queue) -> dict:
    """A job whose manual run failed permanently (and so is a dead letter)."""
    job = create_job(ACME, **FAILING)
    run = body_of(call("POST", f"/jobs/{job['id']}/trigger", headers=ACME))
    assert work_queue() == ["dead_lettered"]
    return run


# --- runs -----------------------------------------------------------------------------------------


def test_get_run_shows_state_attempts_and_error(call, create_job, work_queue):
    run = _failed_run(call, create_job, work_queue)
    response = call("GET", f"/runs/{run['id']}", headers=ACME)
    assert response["statusCode"] == 200
    body = body_of(response)
    assert (body["state"], body["attempt"], body["error"]) == ("failed", 1, "PermanentError: bad input")
    assert [(a["attempt"], a["outcome"]) for a in body["attempts"]] == [(1, "failed")]
    assert body["started_at"].endswith("Z") and body["finished_at"].endswith("Z")


def test_get_run_shows_what_ran_each_attempt(call, create_job, work_queue):
    # Given a job of demo.echo (version 1, unpinned) whose manual run a worker executed
    job = create_job(ACME, payload={"greeting": "hi"})
    run = body_of(call("POST", f"/jobs/{job['id']}/trigger", headers=ACME))
    queued = body_of(call("GET", f"/runs/{run['id']}", headers=ACME))
    assert work_queue() == ["succeeded"]
    # When the run is read
    body = body_of(call("GET", f"/runs/{run['id']}", headers=ACME))
    # Then it was unbound while queued, is bound to version 1 now, and its attempt names the handler,
    # the version and the code version (unset in this test deployment: null)
    assert (queued["handler"], queued["handler_version"]) == ("demo.echo", None)
    assert (body["handler"], body["handler_version"]) == ("demo.echo", 1)
    [attempt] = body["attempts"]
    assert (attempt["handler"], attempt["handler_version"], attempt["code_version"]) == ("demo.echo", 1, None)


def test_succeeded_run_carries_its_output(call, create_job, work_queue):
    job = create_job(ACME, payload={"greeting": "hi"})
    run = body_of(call("POST", f"/jobs/{job['id']}/trigger", headers=ACME))
    assert work_queue() == ["succeeded"]
    body = body_of(call("GET", f"/runs/{run['id']}", headers=ACME))
    assert body["state"] == "succeeded"
    assert body["output"] is not None


def test_get_of_a_malformed_run_id_is_404(call):
    response = call("GET", "/runs/not-a-run-id", headers=ACME)
    assert response["statusCode"] == 404


def test_list_runs_filters_by_state(call, create_job, work_queue):
    failed = _failed_run(call, create_job, work_queue)
    job = create_job(ACME)
    queued = body_of(call("POST", f"/jobs/{job['id']}/trigger", headers=ACME))
    only_failed = body_of(call("GET", "/runs", query={"state": "failed"}, headers=ACME))["items"]
    only_queued = body_of(call("GET", "/runs", query={"state": "queued"}, headers=ACME))["items"]
    assert [r["id"] for r in only_failed] == [failed["id"]]
    assert [r["id"] for r in only_queued] == [queued["id"]]


def test_list_runs_filters_by_job_and_since(call, create_job):
    job = create_job(ACME, schedule="0 * * * *")
    window = {"from": "2026-03-01T00:00:00Z", "to": "2026-03-01T03:00:00Z"}
    call("POST", f"/jobs/{job['id']}/backfill", body=window, headers=ACME)
    other = create_job(ACME, name="other")
    call("POST", f"/jobs/{other['id']}/trigger", headers=ACME)
    query = {"job_id": job["id"], "since": "2026-03-01T02:00:00Z"}
    items = body_of(call("GET", "/runs", query=query, headers=ACME))["items"]
    # (12:00 today was dispatched at creation; 02:00 and 03:00 yesterday are on or after since)
    assert [r["scheduled_at"][:13] for r in items] == ["2026-03-02T12", "2026-03-01T03", "2026-03-01T02"]


def test_a_deleted_jobs_runs_stay_listable(call, create_job):
    job = create_job(ACME)
    run = body_of(call("POST", f"/jobs/{job['id']}/trigger", headers=ACME))
    call("DELETE", f"/jobs/{job['id']}", headers={**ACME, "If-Match": "1"})
    items = body_of(call("GET", "/runs", query={"job_id": job["id"]}, headers=ACME))["items"]
    assert [r["id"] for r in items] == [run["id"]]


def test_list_runs_since_without_job_stops_at_the_bound(call, create_job):
    job = create_job(ACME, schedule="0 * * * *")
    window = {"from": "2026-03-01T00:00:00Z", "to": "2026-03-01T03:00:00Z"}
    call("POST", f"/jobs/{job['id']}/backfill", body=window, headers=ACME)
    items = body_of(call("GET", "/runs", query={"since": "2026-03-01T03:00:00Z"}, headers=ACME))["items"]
    assert [r["scheduled_at"][:13] for r in items] == ["2026-03-02T12", "2026-03-01T03"]


def test_filtered_pages_resume_exactly_where_they_stopped(call, create_job):
    # Given five backfilled runs and one more run of another job, all queued
    job = create_job(ACME, schedule="0 * * * *")
    window = {"from": "2026-03-01T00:00:00Z", "to": "2026-03-01T04:00:00Z"}
    call("POST", f"/jobs/{job['id']}/backfill", body=window, headers=ACME)
    # When they are read two at a time with a state filter
    seen, cursor = [], None
    for _ in range(10):
        query = {"state": "queued", "limit": "2", **({"cursor": cursor} if cursor else {})}
        page = body_of(call("GET", "/runs", query=query, headers=ACME))
        seen += [r["id"] for r in page["items"]]
        cursor = page["next_cursor"]
        if not cursor:
            break
    # Then every run appears exactly once, newest first
    assert len(seen) == len(set(seen)) == 6
    assert seen == sorted(seen, key=lambda i: i.split(".")[1], reverse=True)


def test_cursor_of_another_filter_is_400(call, create_job):
    job = create_job(ACME, schedule="0 * * * *")
    window = {"from": "2026-03-01T00:00:00Z", "to": "2026-03-01T04:00:00Z"}
    call("POST", f"/jobs/{job['id']}/backfill", body=window, headers=ACME)
    cursor = body_of(call("GET", "/runs", query={"limit": "1"}, headers=ACME))["next_cursor"]
    response = call("GET", "/runs", query={"limit": "1", "state": "failed", "cursor": cursor}, headers=ACME)
    assert response["statusCode"] == 400


def test_unknown_state_filter_is_422(call):
    response = call("GET", "/runs", query={"state": "sleeping"}, headers=ACME)
    assert response["statusCode"] == 422
    assert body_of(response)["message"].startswith("state: ")


def test_cancel_a_queued_run(call, create_job):
    job = create_job(ACME)
    run = body_of(call("POST", f"/jobs/{job['id']}/trigger", headers=ACME))
    response = call("POST", f"/runs/{run['id']}/cancel", body={}, headers=ACME)
    assert response["statusCode"] == 200
    assert body_of(response)["state"] == "cancelled"


def test_cancel_a_finished_run_is_409(call, create_job, work_queue):
    run = _failed_run(call, create_job, work_queue)
    response = call("POST", f"/runs/{run['id']}/cancel", headers=ACME)
    assert response["statusCode"] == 409


def test_retry_a_failed_run_with_a_corrected_payload(call, create_job, work_queue):
    run = _failed_run(call, create_job, work_queue)
    response = call("POST", f"/runs/{run['id']}/retry", body={"payload": {"kind": "ok?"}}, headers=ACME)
    assert response["statusCode"] == 200
    retried = body_of(response)
    assert retried["state"] == "queued"


# --- dead letters ---------------------------------------------------------------------------------


def test_dead_letter_lists_payload_error_and_attempts(call, create_job, work_queue):
    run = _failed_run(call, create_job, work_queue)
    page = body_of(call("GET", "/dead-letters", headers=ACME))
    assert page["next_cursor"] is None
    [letter] = page["items"]
    assert (letter["run_id"], letter["job_id"], letter["error"]) == (
        run["id"],
        run["job_id"],
        "PermanentError: bad input",
    )
    assert letter["payload"] == FAILING["payload"]
    assert letter["failed_at"].endswith("Z")
    assert letter["replays"] == [] and len(letter["attempts"]) == 1


def test_replay_a_dead_letter_with_a_payload_records_the_replay(call, create_job, work_queue):
    run = _failed_run(call, create_job, work_queue)
    fixed = {"kind": "permanent", "message": "still bad"}
    response = call("POST", f"/dead-letters/{run['id']}/replay", body={"payload": fixed}, headers=ACME)
    assert response["statusCode"] == 200
    assert body_of(response)["state"] == "queued"
    assert body_of(call("GET", "/dead-letters", headers=ACME))["items"] == []


def test_discard_a_dead_letter(call, create_job, work_queue):
    run = _failed_run(call, create_job, work_queue)
    response = call("DELETE", f"/dead-letters/{run['id']}", headers=ACME)
    assert response["statusCode"] == 200
    assert body_of(response) == {"run_id": run["id"], "discarded": True}
    assert body_of(call("GET", "/dead-letters", headers=ACME))["items"] == []
    assert call("DELETE", f"/dead-letters/{run['id']}", headers=ACME)["statusCode"] == 404


def test_replay_by_filter(call, create_job, work_queue):
    run = _failed_run(call, create_job, work_queue)
    response = call("POST", "/dead-letters/replay", body={"job_id": run["job_id"]}, headers=ACME)
    assert response["statusCode"] == 200
    assert body_of(response) == {"replayed": 1, "run_ids": [run["id"]], "errors": [], "more": False}


def test_replay_of_a_run_that_is_not_a_dead_letter_is_404(call, create_job):
    job = create_job(ACME)
    run = body_of(call("POST", f"/jobs/{job['id']}/trigger", headers=ACME))
    response = call("POST", f"/dead-letters/{run['id']}/replay", headers=ACME)
    assert response["statusCode"] == 404


def test_a_chunked_runs_progress_is_shown_as_integers(call, create_job, work_queue, aws):
    # Given a run whose item carries chunk progress (as the chunk runner writes it: DynamoDB numbers)
    job = create_job(ACME, payload={"greeting": "hi"})
    run = body_of(call("POST", f"/jobs/{job['id']}/trigger", headers=ACME))
    job_id, run_key = parse_run_id(run["id"])
    aws.clients.dynamodb.update_item(
        TableName=aws.settings.runs_table,
        Key={"job_id": {"S": job_id}, "run_key": {"S": run_key}},
        UpdateExpression="SET progress = :p",
        ExpressionAttributeValues={":p": {"M": {"done": {"N": "2"}, "total": {"N": "5"}}}},
    )
    # When it is read through the API / Then progress is {done, total} chunks as plain numbers
    body = body_of(call("GET", f"/runs/{run['id']}", headers=ACME))
    assert body["progress"] == {"done": 2, "total": 5, "unit": "chunks"}


def _store_progress(aws, run_id: str, value: dict) -> None:
    job_id, run_key = parse_run_id(run_id)
    aws.clients.dynamodb.update_item(
        TableName=aws.settings.runs_table,
        Key={"job_id": {"S": job_id}, "run_key": {"S": run_key}},
        UpdateExpression="SET progress = :p",
        ExpressionAttributeValues={":p": value},
    )


@pytest.mark.parametrize(
    "stored",
    [
        {"S": "half way"},
        {"N": "5"},
        {"L": [{"N": "1"}, {"N": "2"}]},
        {"M": {"rows": {"N": "5"}}},
        {"M": {"done": {"S": "three"}, "total": {"N": "5"}}},
        {"M": {"done": {"N": "0.5"}, "total": {"N": "1"}}},
    ],
    ids=["string", "number", "list", "no-done", "done-a-string", "done-a-fraction"],
)
def test_a_stored_progress_that_is_not_a_count_reads_as_none_never_500(call, create_job, aws, stored):
    """Given a run whose item carries what a plain handler's heartbeat could store before progress was
    checked (a string, a number, a list, a dict without done), when the run and the listing are read,
    then both answer 200 and the run's progress is null: not a 500, and not a made-up done 0."""
    job = create_job(ACME, payload={"greeting": "hi"})
    run = body_of(call("POST", f"/jobs/{job['id']}/trigger", headers=ACME))
    _store_progress(aws, run["id"], stored)
    one = call("GET", f"/runs/{run['id']}", headers=ACME)
    listing = call("GET", "/runs", query={"job_id": job["id"]}, headers=ACME)
    assert (one["statusCode"], listing["statusCode"]) == (200, 200)
    assert body_of(one)["progress"] is None
    assert [r["progress"] for r in body_of(listing)["items"]] == [None]


def test_a_plain_handlers_progress_is_shown_with_its_unit(call, create_job, aws):
    """Given a running plain run whose handler reported {"done": 3, "total": 10, "unit": "rows"} (as the
    worker stores it), when it is read, then progress is that, unit included."""
    job = create_job(ACME, payload={"greeting": "hi"})
    run = body_of(call("POST", f"/jobs/{job['id']}/trigger", headers=ACME))
    done = {"done": {"N": "3"}, "total": {"N": "10"}, "unit": {"S": "rows"}}
    _store_progress(aws, run["id"], {"M": done})
    body = body_of(call("GET", f"/runs/{run['id']}", headers=ACME))
    assert body["progress"] == {"done": 3, "total": 10, "unit": "rows"}


def test_a_plain_run_has_no_progress(call, create_job):
    job = create_job(ACME)
    run = body_of(call("POST", f"/jobs/{job['id']}/trigger", headers=ACME))
    assert body_of(call("GET", f"/runs/{run['id']}", headers=ACME))["progress"] is None
