"""DAG workflows, the engine: a workflow run's nodes become runs, each through the same queues,
leases, fencing, retries and idempotency as any run (docs/semantics/workflows.md, decision 0023).

A workflow is a job whose target is ``{"workflow": {"nodes": [...]}}``; the dispatcher, the trigger and
the backfill create its runs exactly as any job's (one code path for schedules, time zones, DST,
misfires, overlap, jitter and pause). Each such run is a *workflow run*:

1. **start** — the worker claims it like any run and, through its composite-target hook (the one
   chunked jobs use), hands it to :meth:`WorkflowEngine.start`: one fenced write keeps the definition
   on the workflow run (``wf_def``), moves its lease to the engine (``lease_owner = workflow``, 12 h,
   so a duplicate delivery waits), and the first :meth:`~WorkflowEngine.advance` starts the roots.
2. **advance** — one strongly consistent Query reads the workflow run and all its node runs (they share
   its partition: node run keys are ``<workflow run key>.n<node id>``), :func:`~jobsched.core.dag.decide`
   says what follows, and every node it starts is *put* with ``attribute_not_exists`` on its
   deterministic id (so two parents finishing at once start their child once: one put wins, the other
   finds the run), recorded in the in-flight ledger first (so the sweeper reaches it), and only the put
   that created it sends its message. Nodes that end without running (``upstream_failed``, ``skipped``,
   ``cancelled``) are put as records the same way. Once every node has ended, the workflow run ends with
   one conditional write (``running`` and ``lease_owner = workflow``).
3. **after a node ends** — the worker calls :meth:`WorkflowEngine.on_finished` (its ``on_finished``
   extension point), which advances the node's workflow run. A crash between a node's end and that
   advance leaves a running workflow run in the ledger: the sweeper advances every running workflow
   run it reads that started more than its grace ago (:meth:`WorkflowEngine.sweep`), and any later
   event of the same workflow run (another node ending, a duplicate delivery) advances it too.

Advancing is idempotent (it decides from stored states and writes conditionally), so any number of
callers may race: each node run is created once, each message sent by the creator only.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from jobsched.aws.attempts import Claim
from jobsched.aws.metering import ConditionFailed
from jobsched.core.dag import (
    FINAL_NODE_STATES,
    Decision,
    NodeState,
    Workflow,
    bodies_of,
    decide,
    is_workflow_target,
    node_payload,
    node_run_id,
    node_state_of,
    retry_plan,
    split_node_run_key,
    structure_of,
    workflow_from_structure,
    workflow_of,
)
from jobsched.core.errors import ConflictError, NotFoundError
from jobsched.core.messages import Outgoing, RunMessage, delay_seconds
from jobsched.core.models import Run, RunState, parse_run_id, to_iso
from jobsched.core.pools import queue_for
from jobsched.core.run_records import bound_target, handler_fields
from jobsched.ports.stores import RunQueue, RunRecords, SpendCap
from jobsched.ports.tables import Table
from jobsched.services.outcome import Outcome, OutcomeStatus

logger = logging.getLogger(__name__)

#: The lease owner of a workflow run while its nodes run (the engine, not a worker).
WORKFLOW_OWNER = "workflow"
#: How long a started workflow run's lease holds: a duplicate delivery of its message waits this long
#: (SQS visibility is capped at 12 h) instead of taking it over.
WORKFLOW_LEASE = timedelta(hours=12) - timedelta(minutes=2)
#: Attributes a started workflow run carries.
DEFINITION = "wf_dag"  # the structure it runs (compact JSON): an edit of the workflow applies to later runs
BODIES = "wf_bodies"  # the key of the item with its nodes' targets and payloads (content-addressed)
#: The partition of the bodies items (``<prefix><job id>``, sort key = the bodies' digest): not a
#: run, never listed; written once per definition (and again when its TTL comes near).
BODIES_PREFIX = "wfbodies#"
INPUT = "wf_input"  # its payload (compact JSON), given to every node as ``workflow_input``
NOTIFY = "wf_notify"
FAILED_NODE = "wf_failed_node"
RETRIES = "wf_retries"


@dataclass
class WorkflowRunView:
    """A workflow run and its nodes, as read (strongly consistent)."""

    run: Run
    workflow: Workflow | None  # None until the run was started (still queued)
    nodes: dict[str, Run] = field(default_factory=dict)  # node id -> its run (or record)
    item: dict[str, Any] = field(default_factory=dict)

    def states(self) -> dict[str, NodeState]:
        if self.workflow is None:
            return {}
        return {
            i: node_state_of(self.nodes[i].to_item() if i in self.nodes else None) for i in self.workflow.ids
        }

    @property
    def retries(self) -> list[dict[str, Any]]:
        return list(self.item.get(RETRIES, []))


class WorkflowEngine:
    """Starts workflow runs, advances them, cancels and retries them (stores and queues injected)."""

    def __init__(
        self,
        *,
        dynamo: Table,
        runs: RunRecords,
        queues: RunQueue,
        replay: Any = None,
        caps: SpendCap | None = None,
    ):
        self.dynamo = dynamo
        self.table = runs.table
        self.runs = runs
        self.queues = queues
        #: ``replay(tenant, run_id, now, action=...)`` (:meth:`jobsched.services.runs.RunService.replay`):
        #: how a retry runs a failed node again. Only the API's engine needs it.
        self.replay = replay
        #: The tenants' spend caps (decision 0062): a retry of a capped tenant's workflow run is
        #: refused before anything is written (the API's engine).
        self.caps = caps
        #: Node bodies by key, read once per process (content-addressed: an item never changes).
        self._bodies: dict[str, dict[str, Any]] = {}

    # --- the worker's hooks ----------------------------------------------------------------------

    @staticmethod
    def job_for(target: Mapping[str, Any]) -> Workflow | None:
        """The workflow a run's target is, or None for any other target."""
        return workflow_of(target) if is_workflow_target(target) else None

    def start(self, msg: RunMessage, claim: Claim, workflow: Workflow, now: datetime) -> Outcome:
        """Hand a claimed workflow run over to the engine and start its roots."""
        run = claim.run
        assert run is not None
        bodies_key = self._keep_bodies(run.job_id, workflow, now)
        sets = ["lease_owner = :wf", "lease_until = :lu", f"{DEFINITION} = :def", f"{BODIES} = :b"]
        values: dict[str, Any] = {
            ":running": "running",
            ":a": claim.attempt,
            ":o": claim.item.get("lease_owner") if claim.item else None,
            ":wf": WORKFLOW_OWNER,
            ":lu": to_iso(now + WORKFLOW_LEASE),
            ":def": _compact(structure_of(workflow)),
            ":b": bodies_key,
        }
        payload = run.payload_override if run.payload_override is not None else msg.payload
        if payload:
            sets.append(f"{INPUT} = :in")
            values[":in"] = json.dumps(payload, separators=(",", ":"))
        if msg.notify:
            sets.append(f"{NOTIFY} = :n")
            values[":n"] = msg.notify
        try:
            self.dynamo.update(
                self.table,
                {"job_id": run.job_id, "run_key": run.run_key},
                "SET " + ", ".join(sets),
                condition="#state = :running AND attempt = :a AND lease_owner = :o",
                names={"#state": "state"},
                values=values,
            )
        except ConditionFailed:
            return Outcome(OutcomeStatus.LEASE_LOST, run.id, claim.attempt, detail={"workflow": True})
        decision = self.advance(run.job_id, run.run_key, now)
        started = len(decision.start) if decision else 0
        return Outcome(
            OutcomeStatus.WORKFLOW_STARTED,
            run.id,
            claim.attempt,
            detail={"nodes": len(workflow.nodes), "started": started},
        )

    def _keep_bodies(self, job_id: str, workflow: Workflow, now: datetime) -> str:
        """Store the nodes' targets and payloads once per definition (content-addressed: the key is
        their digest, so runs of one definition share one item and an edit makes a new one); return
        the key. One eventually consistent read per workflow run; a write only when the item is
        missing or within half the retention of its expiry."""
        text = _compact(bodies_of(workflow))
        key = hashlib.sha256(text.encode()).hexdigest()[:32]
        item_key = {"job_id": BODIES_PREFIX + job_id, "run_key": key}
        stored = self.dynamo.get(self.table, item_key, consistent=False, attributes=("expires_at",))
        expiry = self.runs.expiry_after(now)
        fresh = stored is not None and (
            expiry is None
            or stored.get("expires_at") is None
            or int(stored["expires_at"]) > int(now.timestamp()) + (expiry - int(now.timestamp())) // 2
        )
        if not fresh:
            item: dict[str, Any] = {**item_key, "bodies": text}
            if expiry is not None:
                item["expires_at"] = expiry
            self.dynamo.put(self.table, item)
        self._bodies[key] = json.loads(text)
        return key

    def bodies(self, job_id: str, key: str) -> dict[str, Any]:
        """The nodes' targets and payloads kept under ``key`` (cached: an item never changes)."""
        if key not in self._bodies:
            item = self.dynamo.get(
                self.table, {"job_id": BODIES_PREFIX + job_id, "run_key": key}, consistent=True
            )
            if item is None:
                raise NotFoundError(f"the node definitions {key} of workflow {job_id} are gone")
            self._bodies[key] = json.loads(item["bodies"])
        return self._bodies[key]

    def on_finished(self, msg: RunMessage, outcome: Outcome, now: datetime) -> None:
        """After a node's run ended (or a duplicate delivery found it ended): advance its workflow run."""
        split = split_node_run_key(parse_run_id(msg.run_id)[1])
        if split is not None:
            self.advance(msg.job_id, split[0], now)

    # --- reading ---------------------------------------------------------------------------------

    def read(self, job_id: str, run_key: str) -> WorkflowRunView | None:
        """The workflow run and its node runs: one strongly consistent Query of their partition."""
        items = self.dynamo.query_all(
            self.table,
            "job_id = :j AND begins_with(run_key, :k)",
            {":j": job_id, ":k": run_key},
            consistent=True,
        )
        head = next((i for i in items if i["run_key"] == run_key), None)
        if head is None:
            return None
        nodes: dict[str, Run] = {}
        for item in items:
            split = split_node_run_key(item["run_key"])
            if split is not None and split[0] == run_key:
                nodes[split[1]] = Run.from_item(item)
        workflow = workflow_from_structure(json.loads(head[DEFINITION])) if head.get(DEFINITION) else None
        return WorkflowRunView(Run.from_item(head), workflow, nodes, head)

    def read_run(self, run_id: str) -> WorkflowRunView | None:
        job_id, run_key = parse_run_id(run_id)
        return self.read(job_id, run_key)

    # --- advancing -------------------------------------------------------------------------------

    def advance(self, job_id: str, run_key: str, now: datetime) -> Decision | None:
        """Decide and do the next step of a running workflow run; the :class:`Decision`, or None when
        the run is not a started, running workflow run."""
        view = self.read(job_id, run_key)
        if view is None or view.workflow is None or view.run.state is not RunState.RUNNING:
            return None
        cancel = view.run.cancel_requested
        states = view.states()
        if cancel:
            states.update(self._cancel_active(view, now))
        decision = decide(view.workflow, states, cancel)
        starts = [self._node_run(view, node_id, RunState.QUEUED, None, now) for node_id in decision.start]
        records = [
            self._node_run(view, node_id, *_record_of(state, cancel), now)
            for node_id, state in decision.record.items()
        ]
        if starts:
            self.runs.announce(starts, feed=False, at=now)  # the sweeper's reach, before any put
        for record in records:
            self.runs.put_announced(record)
        outgoing: list[Outgoing] = []
        for run in starts:
            stored, created = self.runs.put_announced(run)
            if created:  # only the writer that created the node run sends its first message
                message = self._message(view, stored, now)
                queue = queue_for(stored.pool, stored.priority)
                outgoing.append(Outgoing(queue, message, delay_seconds(stored.due_at, now)))
        if outgoing:
            report = self.queues.send(outgoing)
            if report.failed:  # queued and in the ledger: the sweeper re-sends them
                logger.warning(
                    "workflow run %s: %s node message(s) not sent", view.run.id, len(report.failed)
                )
        if decision.finish is not None:
            self._finish(view, decision.finish, decision.failed_node, now)
        return decision

    def _cancel_active(self, view: WorkflowRunView, now: datetime) -> dict[str, NodeState]:
        """A cancelled workflow run's active nodes: queued ones end cancelled now, running and retrying
        ones are flagged (their worker sees the flag within about a second)."""
        changed: dict[str, NodeState] = {}
        for node_id, run in view.nodes.items():
            if run.state is RunState.QUEUED or run.state is RunState.RETRYING:
                if self.runs.transition(run, RunState.CANCELLED, now, reason="workflow run cancelled"):
                    changed[node_id] = NodeState.CANCELLED
            elif run.state is RunState.RUNNING and not run.cancel_requested:
                self.runs.request_cancel(run)
        return changed

    def _node_run(
        self, view: WorkflowRunView, node_id: str, state: RunState, reason: str | None, now: datetime
    ) -> Run:
        assert view.workflow is not None
        node = view.workflow.node(node_id)
        wf = view.run
        # A queued node names its handler (its message reads the same cached bodies); others never run.
        body: dict[str, Any] = {}
        if state is RunState.QUEUED:
            body = self.bodies(wf.job_id, str(view.item[BODIES])).get(node_id, {})
        return Run(
            id=node_run_id(wf.id, node_id),
            job_id=wf.job_id,
            tenant=wf.tenant,
            state=state,
            trigger=wf.trigger,
            scheduled_at=wf.scheduled_at,
            due_at=now,
            priority=node.priority,
            pool=node.pool,
            max_attempts=node.retry.max_attempts,
            skip_reason=reason if state is RunState.SKIPPED else None,
            error=reason if state is RunState.CANCELLED else None,
            created_at=now,
            finished_at=None if state is RunState.QUEUED else now,
            wf_node=node_id,
            **handler_fields(dict(body.get("target", {}))),
        )

    def _message(self, view: WorkflowRunView, run: Run, now: datetime) -> RunMessage:
        """The message of a node run's next attempt: the node's target, payload (with its parents'
        outputs and the workflow input), timeout, retry and priority."""
        assert view.workflow is not None and run.wf_node is not None
        node = view.workflow.node(run.wf_node)
        body = self.bodies(run.job_id, str(view.item[BODIES])).get(node.id, {})
        node = replace(node, target=dict(body.get("target", {})), payload=dict(body.get("payload", {})))
        upstream: dict[str, dict[str, Any]] = {}
        for parent in node.depends_on:
            parent_run = view.nodes.get(parent)
            if parent_run is None:
                continue
            entry: dict[str, Any] = {
                "run_id": parent_run.id,
                "state": str(node_state_of(parent_run.to_item())),
            }
            if parent_run.output_ref:
                entry["output_ref"] = parent_run.output_ref
            elif parent_run.output is not None:
                entry["output"] = parent_run.output
            upstream[parent] = entry
        workflow_input = json.loads(view.item[INPUT]) if view.item.get(INPUT) else None
        return RunMessage(
            run_id=run.id,
            job_id=run.job_id,
            tenant=run.tenant,
            attempt=run.attempt + 1,
            scheduled_at=run.scheduled_at,
            due_at=run.due_at,
            target=bound_target(node.target, run.handler_version),
            # None: a node's payload is built here for the version it runs (no upgrade applies).
            payload=node_payload(node, upstream, workflow_input),
            timeout_seconds=node.timeout_seconds,
            retry=node.retry,
            priority=node.priority,
            pool=node.pool,
            notify=dict(view.item.get(NOTIFY) or {}),
            token=run.send_token,
        )

    def _finish(self, view: WorkflowRunView, state: RunState, failed_node: str | None, now: datetime) -> None:
        """End the workflow run (conditional on it still being the engine's running run)."""
        sets = ["#state = :new", "finished_at = :now"]
        values: dict[str, Any] = {
            ":new": str(state),
            ":now": to_iso(now),
            ":running": "running",
            ":wf": WORKFLOW_OWNER,
        }
        names = {"#state": "state"}
        if view.run.attempts:
            i = len(view.run.attempts) - 1
            sets += [f"attempts[{i}].finished_at = :now", f"attempts[{i}].outcome = :new"]
        removes = ["lease_until", "lease_owner"]
        if state is RunState.FAILED:
            names["#error"] = "error"
            if failed_node is not None:
                node_run = view.nodes[failed_node]
                cause = node_run.error or "no error recorded"
                error = f"node {failed_node!r} failed: {cause} (run {node_run.id})"
                sets.append(f"{FAILED_NODE} = :fn")
                values[":fn"] = failed_node
            else:
                error = "a node was upstream_failed"
            sets.append("#error = :err")
            values[":err"] = error
        try:
            self.dynamo.update(
                self.table,
                {"job_id": view.run.job_id, "run_key": view.run.run_key},
                "SET " + ", ".join(sets) + " REMOVE " + ", ".join(removes),
                condition="#state = :running AND lease_owner = :wf",
                names=names,
                values=values,
            )
        except ConditionFailed:
            return  # another advance ended it first
        logger.info("workflow run %s %s", view.run.id, state)

    # --- cancel and retry (the API) --------------------------------------------------------------

    def view(self, tenant: str, run_id: str) -> WorkflowRunView:
        view = self.read_run(run_id)
        if view is None or view.run.tenant != tenant or view.run.wf_node is not None:
            raise NotFoundError(f"workflow run {run_id} not found")
        return view

    def cancel(self, tenant: str, run_id: str, now: datetime) -> WorkflowRunView:
        """Cancel a workflow run: queued (not started yet) it ends ``cancelled`` at once; running, it is
        flagged, its queued nodes end ``cancelled``, its running nodes are flagged, its pending nodes
        end ``cancelled``; it ends once its running nodes have."""
        view = self.view(tenant, run_id)
        run = view.run
        if run.state is RunState.QUEUED:
            if self.runs.transition(run, RunState.CANCELLED, now, reason="cancelled by request") is None:
                raise ConflictError(f"workflow run {run_id} changed while being cancelled; try again")
            return self.view(tenant, run_id)
        if run.state is not RunState.RUNNING:
            raise ConflictError(f"workflow run {run_id} is {run.state}; only queued or running ones cancel")
        if self.runs.request_cancel(run) is None:
            raise ConflictError(f"workflow run {run_id} changed while being cancelled; try again")
        self.advance(run.job_id, run.run_key, now)
        return self.view(tenant, run_id)

    def retry(self, tenant: str, run_id: str, now: datetime) -> WorkflowRunView:
        """Retry a failed workflow run from its failed nodes (see :func:`jobsched.core.dag.retry_plan`);
        recorded in the run's ``wf_retries``. Succeeded nodes do not run again."""
        view = self.view(tenant, run_id)
        run = view.run
        if run.state is not RunState.FAILED or view.workflow is None:
            raise ConflictError(f"workflow run {run_id} is {run.state}; only a failed workflow run retries")
        assert self.replay is not None, "retry needs the run service's replay"
        if self.caps is not None:  # 409 budget_exhausted before the run or a node is touched
            self.caps.refuse_if_capped(tenant, now, f"retry of workflow run {run_id}")
        states = view.states()
        failed, reset = retry_plan(view.workflow, states)
        record = {"at": to_iso(now), "failed": failed, "reset": reset}
        try:
            self.dynamo.update(
                self.table,
                {"job_id": run.job_id, "run_key": run.run_key},
                f"SET #state = :running, lease_owner = :wf, lease_until = :lu, "
                f"{RETRIES} = list_append(if_not_exists({RETRIES}, :empty), :rec) "
                f"REMOVE finished_at, #error, {FAILED_NODE}, cancel_requested",
                condition="#state = :failed",
                names={"#state": "state", "#error": "error"},
                values={
                    ":running": "running",
                    ":failed": "failed",
                    ":wf": WORKFLOW_OWNER,
                    ":lu": to_iso(now + WORKFLOW_LEASE),
                    ":empty": [],
                    ":rec": [record],
                },
            )
        except ConditionFailed:
            raise ConflictError(f"workflow run {run_id} changed while being retried; try again") from None
        for node_id in reset:  # back to pending: decided again
            node_run = view.nodes.get(node_id)
            if node_run is None:
                continue
            try:
                self.dynamo.delete(
                    self.table,
                    {"job_id": node_run.job_id, "run_key": node_run.run_key},
                    condition="#state = :st",
                    names={"#state": "state"},
                    values={":st": str(node_run.state)},
                )
            except ConditionFailed:
                logger.warning("node %s of %s changed during the retry; left as it is", node_id, run_id)
        for node_id in failed:
            self.replay(tenant, view.nodes[node_id].id, now, action="workflow_retry")
        self.advance(run.job_id, run.run_key, now)
        return self.view(tenant, run_id)

    # --- the sweeper's hooks ---------------------------------------------------------------------

    @staticmethod
    def owns(item: Mapping[str, Any]) -> bool:
        """Whether a run item is a started workflow run (the sweeper hands those to :meth:`sweep`)."""
        return bool(item.get(DEFINITION))

    def sweep(self, item: Mapping[str, Any], now: datetime, grace: timedelta) -> bool:
        """Advance a running workflow run that started more than ``grace`` ago (a crash between a node's
        end and its children's start left it waiting); whether it is still active after."""
        if item.get("state") != RunState.RUNNING:
            return False
        started = item.get("started_at")
        if started and started >= to_iso(now - grace):
            return True
        decision = self.advance(item["job_id"], item["run_key"], now)
        return decision is None or decision.finish is None

    def node_message(self, item: Mapping[str, Any], now: datetime) -> RunMessage | None:
        """The message of a node run's next attempt (the sweeper's re-send), or None for another run."""
        split = split_node_run_key(str(item.get("run_key", "")))
        if split is None or not item.get("wf_node"):
            return None
        view = self.read(str(item["job_id"]), split[0])
        if view is None or view.workflow is None or split[1] not in view.nodes:
            return None
        return self._message(view, view.nodes[split[1]], now)


def _record_of(state: NodeState, cancel: bool) -> tuple[RunState, str]:
    """How a node that ends without running is recorded: its run state and reason."""
    if state is NodeState.CANCELLED:
        return RunState.CANCELLED, "workflow run cancelled" if cancel else "a parent was cancelled"
    return RunState.SKIPPED, str(state)


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


class CompositeTargets:
    """The worker's composite-target hook (``Worker(chunks=...)``) for workflows and chunked jobs:
    a workflow target goes to the engine, anything else to the chunk runner (if any)."""

    def __init__(self, engine: WorkflowEngine, chunks: Any = None):
        self.engine = engine
        self.chunks = chunks

    def job_for(self, target: dict[str, Any]) -> Any | None:
        workflow = self.engine.job_for(target)
        if workflow is not None:
            return workflow
        return self.chunks.job_for(target) if self.chunks is not None else None

    def start(self, msg: RunMessage, claim: Claim, job: Any, now: datetime) -> Outcome:
        if isinstance(job, Workflow):
            return self.engine.start(msg, claim, job, now)
        assert self.chunks is not None
        outcome: Outcome = self.chunks.start(msg, claim, job, now)
        return outcome


__all__ = [
    "FINAL_NODE_STATES",
    "CompositeTargets",
    "WorkflowEngine",
    "WorkflowRunView",
]
