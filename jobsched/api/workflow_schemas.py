"""Request and response models of ``/workflows`` and ``/workflow-runs`` (docs/api.md, Workflows).

A workflow's definition is a job's (schedule, zone, DST, misfire, overlap, jitter, notify, ...) with
``nodes`` in place of ``target`` and ``timeout_seconds``: each node has its own target, payload,
timeout, retry policy, priority, pool, parents and trigger rule. Shape and ranges are checked here; the
graph (unknown parents, duplicate ids, cycles, size limits) by :func:`jobsched.core.dag.parse_workflow`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

from jobsched.api.schemas import (
    DEADLINE_DESCRIPTION,
    MAX_DEADLINE,
    MAX_TIMEOUT,
    POOL_DESCRIPTION,
    DstGap,
    DstOverlap,
    JsonInt,
    MisfirePolicy,
    NotifyIn,
    OverlapPolicy,
    Payload,
    Pool,
    Priority,
    RetryIn,
    RunStateName,
    TargetIn,
    _In,
    _storable_payload,
)

TriggerRuleName = Literal["all_success", "all_done", "one_failed"]
NodeStateName = Literal[
    "pending",
    "queued",
    "running",
    "retrying",
    "succeeded",
    "failed",
    "skipped",
    "upstream_failed",
    "cancelled",
]


class NodeIn(_In):
    id: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")
    target: TargetIn
    payload: Payload = Field(default_factory=dict)
    timeout_seconds: JsonInt = Field(
        default=300, ge=1, le=MAX_TIMEOUT, description="up to 900 s on lambda and long, 43200 s on container"
    )
    retry: RetryIn = Field(default_factory=RetryIn)
    priority: Priority = "default"
    pool: Pool | None = Field(default=None, description=POOL_DESCRIPTION)
    depends_on: list[str] = Field(default_factory=list, max_length=100, description="parent node ids")
    trigger_rule: TriggerRuleName = Field(
        default="all_success",
        description="all_success: every parent succeeded; all_done: every parent ended; "
        "one_failed: a parent failed or was upstream_failed",
    )

    _payload_storable = field_validator("payload")(_storable_payload)

    def to_domain(self) -> dict[str, Any]:
        data = self.model_dump()
        data["target"] = self.target.to_domain()
        if data["pool"] is None:  # chosen from the timeout (jobsched.core.dag.with_node_pools)
            del data["pool"]
        return data


class WorkflowIn(_In):
    """``POST /workflows``: a new workflow (a job whose runs are workflow runs)."""

    name: str = Field(min_length=1, max_length=200)
    schedule: str = Field(
        min_length=1, max_length=256, description="cron, @macro, cron(...), rate(...), at(...)"
    )
    timezone: str = Field(default="UTC", min_length=1, max_length=64)
    nodes: list[NodeIn] = Field(min_length=1, max_length=100)
    payload: Payload = Field(
        default_factory=dict, description="the workflow input: every node gets it as workflow_input"
    )
    priority: Priority = "default"
    misfire_policy: MisfirePolicy = "run_once"
    misfire_grace_seconds: JsonInt = Field(default=60, ge=0, le=86400 * 7)
    max_catchup: JsonInt = Field(default=100, ge=1, le=10000)
    overlap_policy: OverlapPolicy = "allow"
    dst_gap: DstGap = "shift"
    dst_overlap: DstOverlap = "first"
    jitter_seconds: JsonInt = Field(default=0, ge=0, le=3600)
    deadline_seconds: JsonInt = Field(default=0, ge=0, le=MAX_DEADLINE, description=DEADLINE_DESCRIPTION)
    description: str = Field(default="", max_length=1000)
    notify: NotifyIn = Field(default_factory=NotifyIn)

    _payload_storable = field_validator("payload")(_storable_payload)

    def to_domain(self) -> dict[str, Any]:
        data = self.model_dump()
        data["nodes"] = [n.to_domain() for n in self.nodes]
        data["notify"] = self.notify.to_domain()
        return data


class WorkflowPatch(_In):
    """``PATCH /workflows/{id}``: the fields to change (``nodes`` replaces the whole list)."""

    name: str | None = Field(default=None, min_length=1, max_length=200)
    schedule: str | None = Field(default=None, min_length=1, max_length=256)
    timezone: str | None = Field(default=None, min_length=1, max_length=64)
    nodes: list[NodeIn] | None = Field(default=None, min_length=1, max_length=100)
    payload: Payload | None = None
    priority: Priority | None = None
    misfire_policy: MisfirePolicy | None = None
    misfire_grace_seconds: JsonInt | None = Field(default=None, ge=0, le=86400 * 7)
    max_catchup: JsonInt | None = Field(default=None, ge=1, le=10000)
    overlap_policy: OverlapPolicy | None = None
    dst_gap: DstGap | None = None
    dst_overlap: DstOverlap | None = None
    jitter_seconds: JsonInt | None = Field(default=None, ge=0, le=3600)
    deadline_seconds: JsonInt | None = Field(default=None, ge=0, le=MAX_DEADLINE, description="0 removes it")
    description: str | None = Field(default=None, max_length=1000)
    notify: NotifyIn | None = None

    _payload_storable = field_validator("payload")(_storable_payload)

    def to_domain(self) -> dict[str, Any]:
        changes = self.model_dump(exclude_unset=True)
        if any(v is None for v in changes.values()):
            nulls = ", ".join(sorted(k for k, v in changes.items() if v is None))
            raise ValueError(f"{nulls}: null is not a value; leave the field out to keep it")
        if self.nodes is not None:
            changes["nodes"] = [n.to_domain() for n in self.nodes]
        if self.notify is not None:
            changes["notify"] = self.notify.to_domain()
        return changes


class WorkflowOut(BaseModel):
    id: str
    state: Literal["active", "paused", "completed"]
    version: int
    name: str
    schedule: str
    timezone: str
    nodes: list[dict[str, Any]] = Field(description="the nodes, parents before children")
    payload: dict[str, Any]
    priority: str
    misfire_policy: str
    misfire_grace_seconds: int
    max_catchup: int
    overlap_policy: str
    dst_gap: str
    dst_overlap: str
    jitter_seconds: int
    deadline_seconds: int = Field(default=0, description=DEADLINE_DESCRIPTION)
    description: str = ""
    notify: dict[str, str] = Field(default_factory=dict)
    paused_note: str | None = None
    created_at: str
    updated_at: str
    next_fire_times: list[str]


class WorkflowList(BaseModel):
    items: list[WorkflowOut]
    next_cursor: str | None


class WorkflowTriggerIn(_In):
    payload: Payload | None = Field(
        default=None, description="the workflow input of this run (overrides the workflow's payload)"
    )

    _payload_storable = field_validator("payload")(_storable_payload)


class PhaseOut(BaseModel):
    phase: Literal["queued", "waiting", "running", "retrying"] = Field(
        description="queued; waiting (held by a concurrency or rate limit); running (an attempt); "
        "retrying (between attempts: the backoff)"
    )
    start: str
    end: str | None = Field(description="null: still in this phase")
    attempt: int = Field(description="the attempt this phase is (running) or leads to")


class NodeOut(BaseModel):
    id: str
    state: NodeStateName
    depends_on: list[str]
    trigger_rule: TriggerRuleName
    run_id: str | None = Field(
        default=None, description="the node's run or record (GET /runs/{id}); null while pending"
    )
    attempt: int = 0
    started_at: str | None = None
    finished_at: str | None = None
    error: str | None = None
    output: Any = Field(default=None, description="the node's output, or {ref: <S3 key>} if kept in S3")
    phases: list[PhaseOut] = Field(
        default_factory=list,
        description="the node run's phases over time, oldest first (decision 0064); empty while pending",
    )


class WorkflowRunOut(BaseModel):
    id: str
    workflow_id: str
    state: RunStateName = Field(description="queued, running, succeeded, failed or cancelled")
    trigger: str
    scheduled_at: str
    started_at: str | None = None
    finished_at: str | None = None
    error: str | None = Field(default=None, description="for a failed run: the node that failed, and why")
    failed_node: str | None = None
    cancel_requested: bool = False
    nodes: list[NodeOut]
    retries: list[dict[str, Any]] = Field(
        default_factory=list, description="each retry from failed nodes: {at, failed, reset}"
    )
    drawing: str = Field(description="the DAG as text, each node with its state")


class WorkflowRunSummary(BaseModel):
    id: str
    workflow_id: str
    state: RunStateName
    trigger: str
    scheduled_at: str
    started_at: str | None = None
    finished_at: str | None = None
    error: str | None = None
    skip_reason: str | None = None


class WorkflowRunList(BaseModel):
    items: list[WorkflowRunSummary]
    next_cursor: str | None


class WorkflowRunsOut(BaseModel):
    runs: list[WorkflowRunSummary]
