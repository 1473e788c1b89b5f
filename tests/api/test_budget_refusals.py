"""Spend caps on the on-demand operations (issue 32 §3, decision 0062 amended): for a tenant over its
monthly budget ``POST /jobs/{id}/trigger``, ``POST /workflows/{id}/runs``, both backfills (the one
made at once and the one accepted in the background), ``POST /dead-letters/{id}/replay``,
``POST /dead-letters/replay`` and ``POST /runs/{id}/retry`` answer 409 ``budget_exhausted`` naming the
budget, the spend and the call that raises it, and write nothing; a run queued ahead that the worker
skipped for the budget shows in ``GET /jobs/{id}/history`` with its reason."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from jobsched.aws.metering import dynamo_for
from jobsched.aws.usage_store import UsageStore
from jobsched.compose.pipeline import worker_from_settings
from jobsched.core.usage import DayUsage
from jobsched.runtime.resources import WORKER_MEMORY_MB
from jobsched.services.deliveries import Delivery
from tests.api.events import ACME, GLOBEX, body_of
from tests.aws.conftest import T0
from tests.aws.conftest_worker import sent_messages

OPS = {"authorization": "Bearer tok-root"}
FAILING = {"target": {"handler": "demo.fail"}, "payload": {"kind": "permanent", "message": "bad input"}}
WORKFLOW = {
    "name": "etl",
    "schedule": "0 3 * * *",
    "nodes": [{"id": "extract", "target": {"handler": "demo.echo"}}],
}


def _cap(aws, call, tenant: str = "acme") -> float:
    """The tenant spent today twice the budget an administrator sets for it; returns the spend."""
    usage = DayUsage(tenant=tenant, day="2026-03-02", run_seconds=1000.0)
    UsageStore(dynamo_for(aws.settings, aws.clients.dynamodb), aws.settings.leases_table).add(usage)
    spent = usage.estimated_usd(WORKER_MEMORY_MB)
    put = call("PUT", f"/admin/tenants/{tenant}/budget", body={"monthly_usd": spent / 2}, headers=OPS)
    assert body_of(put)["state"] == "capped", put["body"]
    return spent


def _refused(response) -> str:
    assert response["statusCode"] == 409, response["body"]
    body = body_of(response)
    assert body["error"] == "budget_exhausted"
    assert "monthly budget of" in body["message"] and "PUT /admin/tenants/acme/budget" in body["message"]
    return body["message"]


def _runs(call, job_id: str) -> list[str]:
    return [r["id"] for r in body_of(call("GET", f"/jobs/{job_id}/runs", headers=ACME))["items"]]


def test_a_trigger_of_a_capped_tenant_is_409_budget_exhausted_and_makes_no_run(aws, call, create_job):
    job = create_job(ACME)
    spent = _cap(aws, call)
    message = _refused(call("POST", f"/jobs/{job['id']}/trigger", headers=ACME))
    assert f"spent {spent:.2f} USD" in message and "200.0 %" in message
    assert _runs(call, job["id"]) == []
    # And globex, without a budget, is not affected
    other = create_job(GLOBEX)
    assert call("POST", f"/jobs/{other['id']}/trigger", headers=GLOBEX)["statusCode"] == 201


def test_a_backfill_made_at_once_and_one_in_the_background_are_both_refused(aws, call, create_job):
    job = create_job(ACME, schedule="0 * * * *")
    before = _runs(call, job["id"])
    _cap(aws, call)
    small = {"from": "2026-03-01T00:00:00Z", "to": "2026-03-01T03:00:00Z"}
    large = {"from": "2026-02-01T00:00:00Z", "to": "2026-02-28T00:00:00Z"}  # > 100: the async path
    _refused(call("POST", f"/jobs/{job['id']}/backfill", body=small, headers=ACME))
    _refused(
        call("POST", f"/jobs/{job['id']}/backfill", body=large, headers={**ACME, "Idempotency-Key": "k1"})
    )
    assert _runs(call, job["id"]) == before
    assert [m for m in sent_messages(aws, "default") if "backfill_id" in m[0]] == []


def test_a_workflow_trigger_and_backfill_of_a_capped_tenant_are_refused(aws, call):
    created = body_of(call("POST", "/workflows", body=WORKFLOW, headers=ACME))
    _cap(aws, call)
    _refused(call("POST", f"/workflows/{created['id']}/runs", headers=ACME))
    window = {"from": "2026-02-27T00:00:00Z", "to": "2026-03-01T00:00:00Z"}
    _refused(call("POST", f"/workflows/{created['id']}/backfill", body=window, headers=ACME))
    assert body_of(call("GET", f"/workflows/{created['id']}/runs", headers=ACME))["items"] == []


@pytest.fixture
def dead_letter(call, create_job, work_queue) -> dict:
    job = create_job(ACME, **FAILING)
    run = body_of(call("POST", f"/jobs/{job['id']}/trigger", headers=ACME))
    assert work_queue() == ["dead_lettered"]
    return run


def test_replays_and_retries_of_a_capped_tenants_dead_letters_are_refused(aws, call, dead_letter):
    _cap(aws, call)
    run_id = dead_letter["id"]
    _refused(call("POST", f"/dead-letters/{run_id}/replay", headers=ACME))
    _refused(call("POST", "/dead-letters/replay", body={}, headers=ACME))
    _refused(call("POST", f"/runs/{run_id}/retry", headers=ACME))
    # Then the run is still failed and still a dead letter, with no replay recorded
    run = body_of(call("GET", f"/runs/{run_id}", headers=ACME))
    assert run["state"] == "failed" and not run.get("replays")
    letters = body_of(call("GET", "/dead-letters", headers=ACME))["items"]
    assert [d["run_id"] for d in letters] == [run_id]


def test_raising_the_budget_lets_the_trigger_through(aws, call, create_job):
    job = create_job(ACME)
    spent = _cap(aws, call)
    _refused(call("POST", f"/jobs/{job['id']}/trigger", headers=ACME))
    call("PUT", "/admin/tenants/acme/budget", body={"monthly_usd": spent * 10}, headers=OPS)
    assert call("POST", f"/jobs/{job['id']}/trigger", headers=ACME)["statusCode"] == 201


def test_a_queued_ahead_run_skipped_by_the_worker_shows_in_the_history_grid(aws, call, create_job, clock):
    # Given acme with a budget, its per-minute job's 12:01 run queued ahead when it was created
    call("PUT", "/admin/tenants/acme/budget", body={"monthly_usd": 1000}, headers=OPS)
    job = create_job(ACME, schedule="* * * * *")
    [body] = [b for b, _ in sent_messages(aws, "default") if b["scheduled_at"].startswith("2026-03-02T12:01")]
    assert body["budgeted"] is True
    # When acme goes over its budget and the worker gets the message at 12:01
    _cap(aws, call)
    clock.set(T0 + timedelta(minutes=1))
    worker = worker_from_settings(aws.settings, aws.clients, clock, "w")
    assert worker.handle(Delivery.of(json.dumps(body)), clock.now()).status == "finished"
    # Then the history grid shows 12:01 skipped with reason budget
    cells = body_of(call("GET", f"/jobs/{job['id']}/history", headers=ACME))["cells"]
    cell = next(c for c in cells if c["scheduled_at"] == "2026-03-02T12:01:00.000Z")
    assert (cell["state"], cell["skip_reason"]) == ("skipped", "budget")


def test_a_retry_of_a_capped_tenants_failed_workflow_run_is_refused_before_anything_is_written(
    aws, clock, call
):
    # Given acme's workflow run failed at its one node
    from tests.aws.workflow_kit import WorkflowKit

    kit = WorkflowKit(aws, clock)
    body = {
        **WORKFLOW,
        "nodes": [{"id": "extract", "target": {"handler": "demo.fail"}, "payload": {"kind": "permanent"}}],
    }
    created = body_of(call("POST", "/workflows", body=body, headers=ACME))
    run = body_of(call("POST", f"/workflows/{created['id']}/runs", headers=ACME))
    kit.drain()
    before = body_of(call("GET", f"/workflow-runs/{run['id']}", headers=ACME))
    assert before["state"] == "failed"
    # When acme is over its budget and the run is retried
    _cap(aws, call)
    _refused(call("POST", f"/workflow-runs/{run['id']}/retry", headers=ACME))
    # Then the workflow run and its node are as they were: failed, no retry recorded
    after = body_of(call("GET", f"/workflow-runs/{run['id']}", headers=ACME))
    assert after == before
