"""The API's workflow service: ``/workflows`` and ``/workflow-runs`` (docs/semantics/workflows.md).

A workflow is stored as a job whose target is ``{"workflow": {"nodes": [...]}}``, so every schedule,
time zone, DST, misfire, overlap, jitter, pause and resume rule of jobs applies to it unchanged: this
service translates a workflow definition into a job definition and calls the job service, and reads
workflow runs and their nodes through the engine (:mod:`jobsched.services.workflows`). The tenant is
a parameter from the caller's identity; another tenant's workflow or workflow run is not found.
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from jobsched.core.dag import WORKFLOW_TARGET, is_workflow_target, workflow_of
from jobsched.core.errors import NotFoundError, ValidationError
from jobsched.core.job_specs import CheckedSpec
from jobsched.core.models import Job, Run
from jobsched.services.jobs import JobService, PauseResult
from jobsched.services.workflows import WorkflowEngine, WorkflowRunView

#: Job fields a workflow does not have: its nodes carry their own target and timeout.
_NOT_WORKFLOW_FIELDS = ("target", "timeout_seconds")


def job_definition(definition: Mapping[str, Any]) -> dict[str, Any]:
    """A workflow definition (job fields, with ``nodes`` instead of ``target``) as a job definition."""
    if not isinstance(definition, Mapping):
        raise ValidationError("a workflow definition must be a JSON object")
    for name in _NOT_WORKFLOW_FIELDS:
        if name in definition:
            raise ValidationError(f"a workflow has no {name!r}: each node has its own", field=name)
    data = dict(definition)
    if "nodes" not in data:
        raise ValidationError("workflow field 'nodes' is required", field="nodes")
    data["target"] = {WORKFLOW_TARGET: {"nodes": data.pop("nodes")}}
    return data


def job_changes(changes: Mapping[str, Any]) -> dict[str, Any]:
    """A workflow patch as a job patch (``nodes`` replaces the whole node list)."""
    for name in _NOT_WORKFLOW_FIELDS:
        if name in changes:
            raise ValidationError(f"a workflow has no {name!r}: each node has its own", field=name)
    data = dict(changes)
    if "nodes" in data:
        data["target"] = {WORKFLOW_TARGET: {"nodes": data.pop("nodes")}}
    return data


class WorkflowService:
    def __init__(self, jobs: JobService, engine: WorkflowEngine):
        self.jobs = jobs
        self.engine = engine

    # --- definitions -----------------------------------------------------------------------------

    def check(self, definition: Mapping[str, Any], now: datetime | None = None) -> CheckedSpec:
        """Validate a new workflow's definition (as the job it is stored as) without writing anything;
        with ``now``, also that its schedule has an occurrence from then. :meth:`create` takes the
        result and does not validate it again."""
        return self.jobs.check(job_definition(definition), now)

    def create(
        self,
        tenant: str,
        definition: CheckedSpec | Mapping[str, Any],
        now: datetime,
        *,
        workflow_id: str | None = None,
    ) -> Job:
        checked = definition if isinstance(definition, CheckedSpec) else self.check(definition)
        return self.jobs.create(tenant, checked, now, job_id=workflow_id)

    def get(self, tenant: str, workflow_id: str) -> Job:
        """The workflow; a job that is not a workflow is not found here (nor another tenant's)."""
        job = self.jobs.get(tenant, workflow_id)
        if not is_workflow_target(job.target):
            raise NotFoundError(f"workflow {workflow_id} not found")
        return job

    def list(
        self, tenant: str, *, limit: int = 50, cursor: str | None = None
    ) -> tuple[builtins.list[Job], str | None]:
        """A page of the tenant's workflows (its jobs, read page by page, workflows kept)."""
        found: builtins.list[Job] = []
        after = cursor
        while True:
            jobs, after = self.jobs.list(tenant, limit=limit, cursor=after)
            for job in jobs:
                if is_workflow_target(job.target):
                    found.append(job)
                    if len(found) == limit:
                        return found, job.id
            if after is None:
                return found, None

    def update(
        self, tenant: str, workflow_id: str, changes: Mapping[str, Any], expected_version: int, now: datetime
    ) -> Job:
        self.get(tenant, workflow_id)
        return self.jobs.update(tenant, workflow_id, job_changes(changes), expected_version, now)

    def delete(
        self, tenant: str, workflow_id: str, now: datetime, expected_version: int | None = None
    ) -> builtins.list[str]:
        self.get(tenant, workflow_id)
        return self.jobs.delete(tenant, workflow_id, now, expected_version)

    def pause(self, tenant: str, workflow_id: str, now: datetime, note: str | None = None) -> PauseResult:
        self.get(tenant, workflow_id)
        return self.jobs.pause(tenant, workflow_id, now, note)

    def resume(self, tenant: str, workflow_id: str, now: datetime, misfire_policy: str | None = None) -> Job:
        self.get(tenant, workflow_id)
        return self.jobs.resume(tenant, workflow_id, now, misfire_policy)

    # --- workflow runs ---------------------------------------------------------------------------

    def trigger(
        self,
        tenant: str,
        workflow_id: str,
        now: datetime,
        *,
        payload: dict[str, Any] | None = None,
        nonce: str | None = None,
    ) -> Run:
        """Start a workflow run now (also while paused); ``payload`` is its ``workflow_input``."""
        self.get(tenant, workflow_id)
        return self.jobs.trigger(tenant, workflow_id, now, payload=payload, nonce=nonce)

    def backfill(
        self, tenant: str, workflow_id: str, start: datetime, end: datetime, now: datetime
    ) -> builtins.list[Run]:
        self.get(tenant, workflow_id)
        return self.jobs.backfill(tenant, workflow_id, start, end, now)

    def runs(
        self, tenant: str, workflow_id: str, *, limit: int = 50, cursor: str | None = None
    ) -> tuple[builtins.list[Run], str | None]:
        self.get(tenant, workflow_id)
        return self.jobs.runs.list_for_job(workflow_id, limit=limit, start_after=cursor)

    def run(self, tenant: str, run_id: str) -> WorkflowRunView:
        """A workflow run with its nodes' states; another tenant's, a node's run or a run of a job that
        is not a workflow is not found."""
        view = self.engine.view(tenant, run_id)
        if view.workflow is None:  # not started yet: it is a workflow run if its job is a workflow
            try:
                job = self.get(tenant, view.run.job_id)
            except NotFoundError:
                raise NotFoundError(f"workflow run {run_id} not found") from None
            view.workflow = workflow_of(job.target)  # shown with every node pending
        return view

    def cancel(self, tenant: str, run_id: str, now: datetime) -> WorkflowRunView:
        self.run(tenant, run_id)
        return self.engine.cancel(tenant, run_id, now)

    def retry(self, tenant: str, run_id: str, now: datetime) -> WorkflowRunView:
        self.run(tenant, run_id)
        return self.engine.retry(tenant, run_id, now)
