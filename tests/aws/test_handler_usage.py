"""What refers to handlers, read from DynamoDB on moto (jobsched.aws.handler_usage, decision 0049):
a tenant's jobs and every tenant's, runs in flight through the ledger, dead letters through the
sparse index; runs that name their handler and bound version, and runs written before they did."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from jobsched.aws.handler_usage import HandlerUsage
from jobsched.core.models import Run, RunState, make_run_id
from tests.aws.conftest import T0

DAILY = {"schedule": "0 3 * * *"}


def _usage(pipeline) -> HandlerUsage:
    settings = pipeline.env.settings
    return HandlerUsage(pipeline.dispatcher.runs.dynamo, settings.jobs_table, settings.runs_table)


def _dead_letter(pipeline, job_id: str, tenant: str, *, handler: str | None, version: int | None) -> Run:
    run = Run(
        id=make_run_id(job_id, T0 - timedelta(hours=1)),
        job_id=job_id,
        tenant=tenant,
        state=RunState.FAILED,
        scheduled_at=T0 - timedelta(hours=1),
        due_at=T0 - timedelta(hours=1),
        created_at=T0 - timedelta(hours=1),
        dead_lettered_at=T0 - timedelta(minutes=50),
        handler=handler,
        handler_version=version,
    )
    pipeline.dispatcher.runs.dynamo.put(pipeline.env.settings.runs_table, run.to_item())
    return run


def test_a_tenants_jobs_runs_in_flight_and_dead_letters_are_its_references(pipeline):
    # Given acme's job pinned to echo v1 with a run triggered now, an unpinned one, and a dead letter
    # bound to sleep v2; and globex's job
    pinned = pipeline.jobs.create(
        "acme", {"name": "a", **DAILY, "target": {"handler": "echo", "version": 1}}, T0
    )
    unpinned = pipeline.jobs.create("acme", {"name": "b", **DAILY, "target": {"handler": "echo"}}, T0)
    pipeline.jobs.jobs.replace(
        replace(unpinned, payload_version=1, version=unpinned.version + 1), unpinned.version
    )
    run = pipeline.jobs.trigger("acme", pinned.id, T0)
    dead = _dead_letter(pipeline, unpinned.id, "acme", handler="sleep", version=2)
    other = pipeline.jobs.create("globex", {"name": "c", **DAILY, "target": {"handler": "fail"}}, T0)
    # When acme's references are read
    refs = sorted(_usage(pipeline).references("acme"), key=lambda r: (r.kind, r.id))
    # Then they are its two jobs, the queued run (named through its pinned job) and the dead letter
    assert [(r.kind, r.id, r.handler, r.version, r.payload_version) for r in refs] == sorted(
        [
            ("dead_lettered", dead.id, "sleep", 2, None),
            ("jobs", pinned.id, "echo", 1, 1),
            ("jobs", unpinned.id, "echo", None, 1),
            ("queued", run.id, "echo", 1, None),
        ]
    )
    # And every tenant's references add globex's job
    everyone = {(r.kind, r.id) for r in _usage(pipeline).references(None)}
    assert ("jobs", other.id) in everyone and ("dead_lettered", dead.id) in everyone
