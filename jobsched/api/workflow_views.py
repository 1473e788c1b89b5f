"""Workflows and workflow runs -> response models (:mod:`jobsched.api.workflow_schemas`)."""

from __future__ import annotations

from datetime import datetime

from jobsched.api.schemas import iso_z
from jobsched.api.views import job_view
from jobsched.api.workflow_schemas import NodeOut, PhaseOut, WorkflowOut, WorkflowRunOut, WorkflowRunSummary
from jobsched.core.dag import NodeState, draw, workflow_of
from jobsched.core.models import Job, Run
from jobsched.core.phases import Phase, run_phases
from jobsched.services.workflows import FAILED_NODE, WorkflowRunView


def _opt(value: datetime | None) -> str | None:
    return iso_z(value) if value is not None else None


def _phase(phase: Phase) -> PhaseOut:
    return PhaseOut(phase=phase.phase, start=iso_z(phase.start), end=_opt(phase.end), attempt=phase.attempt)


def workflow_view(job: Job, now: datetime) -> WorkflowOut:
    data = job_view(job, now).model_dump()
    for name in ("target", "timeout_seconds", "retry", "pool"):  # each node names its own pool
        data.pop(name)
    data["nodes"] = [n.to_dict() for n in workflow_of(job.target).nodes]
    return WorkflowOut(**data)


def workflow_run_summary(run: Run) -> WorkflowRunSummary:
    return WorkflowRunSummary(
        id=run.id,
        workflow_id=run.job_id,
        state=str(run.state),  # type: ignore[arg-type]
        trigger=str(run.trigger),
        scheduled_at=iso_z(run.scheduled_at),
        started_at=_opt(run.started_at),
        finished_at=_opt(run.finished_at),
        error=run.error,
        skip_reason=run.skip_reason,
    )


def workflow_run_view(view: WorkflowRunView) -> WorkflowRunOut:
    run = view.run
    states = view.states()
    nodes: list[NodeOut] = []
    if view.workflow is not None:
        for node in view.workflow.nodes:
            node_run = view.nodes.get(node.id)
            state = states.get(node.id, NodeState.PENDING)
            output = None
            if node_run is not None:
                output = node_run.output
                if output is None and node_run.output_ref:
                    output = {"ref": node_run.output_ref}
            nodes.append(
                NodeOut(
                    id=node.id,
                    state=str(state),  # type: ignore[arg-type]
                    depends_on=list(node.depends_on),
                    trigger_rule=str(node.trigger_rule),  # type: ignore[arg-type]
                    run_id=node_run.id if node_run is not None else None,
                    attempt=node_run.attempt if node_run is not None else 0,
                    started_at=_opt(node_run.started_at) if node_run is not None else None,
                    finished_at=_opt(node_run.finished_at) if node_run is not None else None,
                    error=(node_run.error or node_run.skip_reason) if node_run is not None else None,
                    output=output,
                    phases=[_phase(p) for p in run_phases(node_run)] if node_run is not None else [],
                )
            )
    return WorkflowRunOut(
        id=run.id,
        workflow_id=run.job_id,
        state=str(run.state),  # type: ignore[arg-type]
        trigger=str(run.trigger),
        scheduled_at=iso_z(run.scheduled_at),
        started_at=_opt(run.started_at),
        finished_at=_opt(run.finished_at),
        error=run.error,
        failed_node=view.item.get(FAILED_NODE),
        cancel_requested=run.cancel_requested,
        nodes=nodes,
        retries=view.retries,
        drawing=draw(view.workflow, states) if view.workflow is not None else "",
    )
