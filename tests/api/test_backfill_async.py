"""``POST /jobs/{id}/backfill`` over 100 occurrences answers 202 with a backfill whose progress
``GET /jobs/{id}/backfills/{bid}`` shows; the worker makes its runs a slice at a time; a repeated
request with the same ``Idempotency-Key`` names the same backfill and never creates a run twice."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest

from jobsched.compose.pipeline import worker_from_settings
from jobsched.core.backfills import BackfillMessage
from jobsched.services.backfills import BackfillService
from jobsched.services.deliveries import Delivery
from tests.api.events import ACME, GLOBEX, body_of

HOURLY_300 = {"from": "2026-02-01T00:00:00Z", "to": "2026-02-13T11:00:00Z"}  # 300 hourly occurrences


def backfill_messages(aws: Any) -> list[dict]:
    """Receive (and delete) the backfill messages waiting in the default queue; the run messages met
    on the way are hidden for the rest of the test (a 600 s visibility timeout on the test's clock)."""
    url = aws.settings.queue_url("default")
    found: list[dict] = []
    while messages := aws.clients.sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=600
    ).get("Messages", []):
        for m in messages:
            if BackfillMessage.accepts(m["Body"]):
                found.append(m)
                aws.clients.sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
    return found


def work_backfills(aws: Any, clock: Any) -> list[str]:
    """Deliver every waiting backfill message to the worker (as the event source mapping would) until
    none is left; the outcomes in order."""
    deliveries = worker_from_settings(aws.settings, aws.clients, clock, "test-worker")
    outcomes = []
    while messages := backfill_messages(aws):
        for m in messages:
            outcomes.append(str(deliveries.handle(Delivery.of(m["Body"]), clock.now()).status))
    return outcomes


def all_runs(call: Any, job_id: str) -> list[dict]:
    runs, cursor = [], None
    while True:
        query = {"limit": "200", **({"cursor": cursor} if cursor else {})}
        page = body_of(call("GET", f"/jobs/{job_id}/runs", headers=ACME, query=query))
        runs += page["items"]
        cursor = page["next_cursor"]
        if not cursor:
            return runs


@pytest.fixture
def hourly(create_job):
    return create_job(ACME, schedule="0 * * * *")


def test_a_backfill_over_100_occurrences_answers_202_with_its_progress(call, hourly, aws, clock):
    # When 300 occurrences are backfilled
    response = call("POST", f"/jobs/{hourly['id']}/backfill", body=HOURLY_300, headers=ACME)
    # Then 202 with a running backfill of 300 planned occurrences and its Location
    assert response["statusCode"] == 202, response["body"]
    backfill = body_of(response)
    assert backfill["state"] == "running" and backfill["planned"] == 300 and backfill["done"] == 0
    assert backfill["from"] == "2026-02-01T00:00:00.000Z" and backfill["runs"] == f"/jobs/{hourly['id']}/runs"
    location = response["headers"]["Location"]
    assert location == f"/jobs/{hourly['id']}/backfills/{backfill['id']}"
    # and no run exists yet
    assert [r for r in all_runs(call, hourly["id"]) if r["trigger"] == "backfill"] == []


def test_the_worker_makes_every_run_once_and_the_backfill_succeeds(call, hourly, aws, clock):
    # Given a 300-occurrence backfill accepted
    location = call("POST", f"/jobs/{hourly['id']}/backfill", body=HOURLY_300, headers=ACME)["headers"][
        "Location"
    ]
    # When the worker takes its message
    outcomes = work_backfills(aws, clock)
    # Then one delivery decided the three slices, and the backfill shows them all
    assert outcomes == ["backfill_done"]
    backfill = body_of(call("GET", location, headers=ACME))
    assert backfill["state"] == "succeeded" and backfill["done"] == 300
    assert backfill["created"] == 300 and backfill["existing"] == 0 and backfill["sent"] == 300
    assert backfill["finished_at"] is not None
    runs = [r for r in all_runs(call, hourly["id"]) if r["trigger"] == "backfill"]
    assert len(runs) == 300 and len({r["scheduled_at"] for r in runs}) == 300
    assert {r["state"] for r in runs} == {"queued"}


def test_a_repeated_request_with_the_same_key_names_the_same_backfill_and_creates_nothing_twice(
    call, hourly, aws, clock
):
    # Given a backfill accepted under an Idempotency-Key and run to the end
    headers = {**ACME, "idempotency-key": "fill-feb"}
    first = call("POST", f"/jobs/{hourly['id']}/backfill", body=HOURLY_300, headers=headers)
    work_backfills(aws, clock)
    # When the same request is sent again
    again = call("POST", f"/jobs/{hourly['id']}/backfill", body=HOURLY_300, headers=headers)
    # Then it answers the same backfill, replayed, and queues nothing more
    assert again["statusCode"] == 202 and again["headers"]["Idempotent-Replayed"] == "true"
    assert body_of(again)["id"] == body_of(first)["id"] and body_of(again)["state"] == "succeeded"
    assert work_backfills(aws, clock) == []
    runs = [r for r in all_runs(call, hourly["id"]) if r["trigger"] == "backfill"]
    assert len(runs) == 300


def test_a_repeat_while_running_resumes_it_without_a_second_run(call, hourly, aws, clock):
    # Given a backfill whose first message was lost (never delivered)
    headers = {**ACME, "idempotency-key": "lost-message"}
    call("POST", f"/jobs/{hourly['id']}/backfill", body=HOURLY_300, headers=headers)
    assert len(backfill_messages(aws)) == 1  # taken off the queue: lost
    # When the request is repeated with the same key
    again = call("POST", f"/jobs/{hourly['id']}/backfill", body=HOURLY_300, headers=headers)
    assert again["statusCode"] == 202 and body_of(again)["state"] == "running"
    # Then its message is sent again and the worker makes every run once
    assert work_backfills(aws, clock) == ["backfill_done"]
    runs = [r for r in all_runs(call, hourly["id"]) if r["trigger"] == "backfill"]
    assert len(runs) == 300 and max(Counter(r["id"] for r in runs).values()) == 1


def test_the_same_key_for_another_range_is_422(call, hourly):
    headers = {**ACME, "idempotency-key": "k1"}
    call("POST", f"/jobs/{hourly['id']}/backfill", body=HOURLY_300, headers=headers)
    other = {"from": "2026-01-01T00:00:00Z", "to": "2026-01-13T11:00:00Z"}
    response = call("POST", f"/jobs/{hourly['id']}/backfill", body=other, headers=headers)
    assert response["statusCode"] == 422
    assert body_of(response)["error"] == "idempotency_key_reused"


def test_two_deliveries_of_one_message_record_each_slice_once(call, hourly, aws, clock):
    # Given a backfill's message delivered twice (SQS at-least-once), one after the other
    call("POST", f"/jobs/{hourly['id']}/backfill", body=HOURLY_300, headers=ACME)
    [message] = backfill_messages(aws)
    deliveries = worker_from_settings(aws.settings, aws.clients, clock, "w")
    # When both deliveries are processed
    first = deliveries.handle(Delivery.of(message["Body"]), clock.now()).status
    second = deliveries.handle(Delivery.of(message["Body"]), clock.now()).status
    # Then the second finds the backfill done, and every run exists once
    assert (first, second) == ("backfill_done", "finished")
    runs = [r for r in all_runs(call, hourly["id"]) if r["trigger"] == "backfill"]
    assert len(runs) == 300


def test_a_crash_after_the_puts_leaves_the_slice_to_the_redelivery(call, hourly, aws, clock, monkeypatch):
    # Given a delivery that dies after the first slice's runs were put and sent, before its progress
    from jobsched.aws.backfill_store import BackfillStore

    call("POST", f"/jobs/{hourly['id']}/backfill", body=HOURLY_300, headers=ACME)
    [message] = backfill_messages(aws)
    deliveries = worker_from_settings(aws.settings, aws.clients, clock, "w")

    def crash(self, before, after):
        raise RuntimeError("process died")

    monkeypatch.setattr(BackfillStore, "record", crash)
    with pytest.raises(RuntimeError):
        deliveries.handle(Delivery.of(message["Body"]), clock.now())
    monkeypatch.undo()
    # When SQS delivers the message again
    outcome = deliveries.handle(Delivery.of(message["Body"]), clock.now())
    # Then the slice is decided again: its 100 runs are found (not created twice), the rest created
    location = f"/jobs/{hourly['id']}/backfills/{json.loads(message['Body'])['backfill_id']}"
    backfill = body_of(call("GET", location, headers=ACME))
    assert outcome.status == "backfill_done" and backfill["state"] == "succeeded"
    assert (backfill["created"], backfill["existing"]) == (200, 100)
    runs = [r for r in all_runs(call, hourly["id"]) if r["trigger"] == "backfill"]
    assert len(runs) == 300


def test_a_delivery_over_its_budget_hands_the_rest_to_a_new_message(call, hourly, aws, clock):
    # Given a worker whose backfill deliveries stop after their first slice
    call("POST", f"/jobs/{hourly['id']}/backfill", body=HOURLY_300, headers=ACME)
    deliveries = worker_from_settings(aws.settings, aws.clients, clock, "w")
    backfills = deliveries.handler_of(BackfillService)
    assert backfills is not None
    backfills.budget_seconds = 0.0
    outcomes = []
    # When the messages are delivered one after the other
    while messages := backfill_messages(aws):
        outcomes += [str(deliveries.handle(Delivery.of(m["Body"]), clock.now()).status) for m in messages]
    # Then three deliveries took a slice each, and all 300 runs exist once
    assert outcomes == ["backfill_step", "backfill_step", "backfill_done"]
    runs = [r for r in all_runs(call, hourly["id"]) if r["trigger"] == "backfill"]
    assert len(runs) == 300


def test_a_backfill_of_100_or_fewer_stays_synchronous(call, hourly):
    window = {"from": "2026-02-01T00:00:00Z", "to": "2026-02-05T03:00:00Z"}  # 100 occurrences
    response = call("POST", f"/jobs/{hourly['id']}/backfill", body=window, headers=ACME)
    assert response["statusCode"] == 201 and len(body_of(response)["runs"]) == 100


def test_another_tenants_backfill_is_not_found(call, hourly):
    response = call("POST", f"/jobs/{hourly['id']}/backfill", body=HOURLY_300, headers=ACME)
    location = response["headers"]["Location"]
    assert call("GET", location, headers=GLOBEX)["statusCode"] == 404
    assert call("GET", f"/jobs/{hourly['id']}/backfills/bnot-an-id", headers=ACME)["statusCode"] == 404
    assert call("GET", f"/jobs/{hourly['id']}/backfills/b{'0' * 24}", headers=ACME)["statusCode"] == 404


def test_the_openapi_document_describes_the_202_and_links_it_to_the_backfill(call):
    doc = body_of(call("GET", "/openapi.json"))
    post = doc["paths"]["/jobs/{job_id}/backfill"]["post"]
    accepted = post["responses"]["202"]
    assert accepted["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/BackfillOut"}
    link = accepted["links"]["GetBackfill"]
    assert link["parameters"] == {
        "path.job_id": "$response.body#/job_id",
        "path.backfill_id": "$response.body#/id",
    }
    assert any(p["name"] == "idempotency-key" for p in post["parameters"])
    assert "from" in doc["components"]["schemas"]["BackfillOut"]["properties"]


def test_an_async_backfill_of_a_container_job_queues_its_runs_on_the_container_queue(
    call, create_job, aws, clock
):
    # Given an hourly job on the container pool and a 300-occurrence backfill accepted (its own
    # message waits in the job's priority queue: it only makes runs, a Lambda worker's short work)
    job = create_job(ACME, schedule="0 * * * *", pool="container")
    call("POST", f"/jobs/{job['id']}/backfill", body=HOURLY_300, headers=ACME)
    # When the worker takes its message
    assert work_backfills(aws, clock) == ["backfill_done"]
    # Then every run it made waits in the container queue, none in a priority queue
    url = aws.settings.queue_url("container")
    run_ids: set[str] = set()
    while got := aws.clients.sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=600
    ).get("Messages", []):
        run_ids |= {json.loads(m["Body"])["run_id"] for m in got}
    backfilled = {r["id"] for r in all_runs(call, job["id"]) if r["trigger"] == "backfill"}
    assert len(backfilled) == 300 and backfilled <= run_ids
    assert backfill_messages(aws) == []
    for kind in ("high", "default", "low", "long"):
        visible = aws.clients.sqs.get_queue_attributes(
            QueueUrl=aws.settings.queue_url(kind), AttributeNames=["ApproximateNumberOfMessages"]
        )["Attributes"]["ApproximateNumberOfMessages"]
        assert int(visible) == 0, kind
