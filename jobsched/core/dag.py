"""DAG workflows, the pure part: definitions and their validation, node states, trigger rules, and
what a workflow run does next. No SDK, no clock: states and instants are parameters.

A workflow is a job whose target is ``{"workflow": {"nodes": [...]}}`` (docs/semantics/workflows.md,
docs/decisions/0023-dag-workflows.md); each of its runs is a *workflow run*, and each node of a
workflow run is a run of its own with the id ``<workflow run id>.n<node id>``
(:func:`node_run_id`), so a node runs once per workflow run: its run item is created with a
conditional put on that id. :func:`decide` is the whole engine's logic: from the states of the nodes
(read from their run items) it says which nodes start, which end without running (``upstream_failed``,
``skipped``, ``cancelled``) and whether the workflow run is over. It is idempotent: deciding again on
the same states decides the same, so any number of callers (the worker after a node ends, a duplicate
delivery, the sweeper) may run it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from jobsched.core.errors import PayloadTooLargeError, ValidationError
from jobsched.core.messages import MAX_PAYLOAD_BYTES, payload_size
from jobsched.core.models import PRIORITIES, RetrySpec, RunState
from jobsched.core.pools import (
    CONTAINER_POOL,
    LAMBDA_POOL,
    LAMBDA_TIME_LIMIT_SECONDS,
    check_pool,
    check_timeout,
    default_pool,
)

#: The key of a job target that makes the job a workflow.
WORKFLOW_TARGET = "workflow"
MAX_NODES = 100
MAX_EDGES = 500
#: The whole definition (compact JSON) travels in the workflow run's message and is kept on the
#: workflow run: at most as large as a payload.
MAX_DEFINITION_BYTES = MAX_PAYLOAD_BYTES
#: Keys the engine adds to a node's payload (so a node's own payload may not use them).
UPSTREAM_KEY = "upstream"
INPUT_KEY = "workflow_input"
NODE_FIELDS = frozenset(
    {"id", "target", "payload", "timeout_seconds", "retry", "priority", "pool", "depends_on", "trigger_rule"}
)
#: Attribute of a node's run item naming its node (what tells a node run from any other run).
NODE_ATTRIBUTE = "wf_node"
#: Separator between a workflow run's key and a node id in a node run's key.
NODE_SEPARATOR = ".n"


class TriggerRule(StrEnum):
    """When a node with parents runs (a node without parents runs when the workflow run starts)."""

    ALL_SUCCESS = "all_success"  # every parent succeeded (the default)
    ALL_DONE = "all_done"  # every parent ended, whatever its state (cleanup)
    ONE_FAILED = "one_failed"  # a parent failed or was upstream_failed (compensation)


class NodeState(StrEnum):
    PENDING = "pending"  # not started: waiting for its parents
    QUEUED = "queued"
    RUNNING = "running"
    RETRYING = "retrying"
    SUCCEEDED = "succeeded"
    FAILED = "failed"  # failed for good (its run is a dead letter)
    SKIPPED = "skipped"  # its trigger rule can no longer be met, and nothing upstream failed
    UPSTREAM_FAILED = "upstream_failed"  # a parent failed (or was upstream_failed)
    CANCELLED = "cancelled"


FINAL_NODE_STATES = frozenset(
    {
        NodeState.SUCCEEDED,
        NodeState.FAILED,
        NodeState.SKIPPED,
        NodeState.UPSTREAM_FAILED,
        NodeState.CANCELLED,
    }
)
_FAILED = frozenset({NodeState.FAILED, NodeState.UPSTREAM_FAILED})
#: Node states recorded without a run (a skipped run item whose ``skip_reason`` is the state).
RECORDED_STATES = frozenset({NodeState.SKIPPED, NodeState.UPSTREAM_FAILED})


@dataclass(frozen=True)
class Node:
    id: str
    target: dict[str, Any]
    payload: dict[str, Any] = field(default_factory=dict)
    timeout_seconds: int = 300
    retry: RetrySpec = field(default_factory=RetrySpec)
    priority: str = "default"
    #: Where the node's run executes (:mod:`jobsched.core.pools`); a stored node without one: ``lambda``.
    pool: str = LAMBDA_POOL
    depends_on: tuple[str, ...] = ()
    trigger_rule: TriggerRule = TriggerRule.ALL_SUCCESS

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "target": self.target,
            "payload": self.payload,
            "timeout_seconds": self.timeout_seconds,
            "retry": self.retry.to_dict(),
            "priority": self.priority,
            "pool": self.pool,
            "depends_on": list(self.depends_on),
            "trigger_rule": str(self.trigger_rule),
        }


@dataclass(frozen=True)
class Workflow:
    """A validated definition: nodes in topological order (parents before children)."""

    nodes: tuple[Node, ...]

    @property
    def ids(self) -> list[str]:
        return [n.id for n in self.nodes]

    def node(self, node_id: str) -> Node:
        for node in self.nodes:
            if node.id == node_id:
                return node
        raise KeyError(node_id)

    def children(self, node_id: str) -> list[str]:
        return [n.id for n in self.nodes if node_id in n.depends_on]

    def to_target(self) -> dict[str, Any]:
        return {WORKFLOW_TARGET: {"nodes": [n.to_dict() for n in self.nodes]}}


# --- definitions ---------------------------------------------------------------------------------


def is_workflow_target(target: Any) -> bool:
    return isinstance(target, Mapping) and set(target) == {WORKFLOW_TARGET}


def workflow_of(target: Mapping[str, Any]) -> Workflow:
    """The workflow a (stored, already validated) job target holds."""
    return parse_workflow(target[WORKFLOW_TARGET])


def parse_workflow(
    definition: Any, validate_node_target: Any = None, *, time_limit: int = LAMBDA_TIME_LIMIT_SECONDS
) -> Workflow:
    """Validate a definition ``{"nodes": [...]}`` and return it in topological order.

    ``validate_node_target(target, pool)`` checks each node's target (the job target rules: a
    registered handler or an HTTP call, its timeout within the node's pool). A node's ``pool`` is
    ``container`` or ``lambda`` from its timeout when it names none (:func:`default_pool`, with
    ``time_limit``, the deployment's Lambda limit; the API stores the choice: :func:`with_node_pools`).
    Every error is a :class:`ValidationError` naming the field: duplicate ids, an unknown parent, a
    cycle (with its nodes, in order), the size limits, a timeout beyond the node's pool.
    """
    if not isinstance(definition, Mapping) or set(definition) != {"nodes"}:
        raise ValidationError('a workflow is {"nodes": [...]}', field="nodes")
    try:
        size = payload_size(dict(definition))
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"the workflow is not JSON-serializable: {exc}", field="nodes") from exc
    if size > MAX_DEFINITION_BYTES:
        raise PayloadTooLargeError(
            f"the workflow definition is {size} bytes; the limit is {MAX_DEFINITION_BYTES} bytes of JSON"
        )
    raw = definition["nodes"]
    if not isinstance(raw, list) or not raw:
        raise ValidationError("nodes must be a non-empty list", field="nodes")
    if len(raw) > MAX_NODES:
        raise ValidationError(f"a workflow has at most {MAX_NODES} nodes, got {len(raw)}", field="nodes")
    nodes = [_node(i, data, validate_node_target, time_limit) for i, data in enumerate(raw)]
    seen: set[str] = set()
    for node in nodes:
        if node.id in seen:
            raise ValidationError(f"duplicate node id {node.id!r}", field="nodes")
        seen.add(node.id)
    edges = sum(len(n.depends_on) for n in nodes)
    if edges > MAX_EDGES:
        raise ValidationError(f"a workflow has at most {MAX_EDGES} edges, got {edges}", field="nodes")
    for node in nodes:
        for parent in node.depends_on:
            if parent not in seen:
                raise ValidationError(
                    f"node {node.id!r} depends on unknown node {parent!r}", field="depends_on"
                )
    cycle = find_cycle(nodes)
    if cycle:
        raise ValidationError("the workflow has a cycle: " + " -> ".join(cycle), field="depends_on")
    return Workflow(tuple(_topological(nodes)))


def with_node_pools(
    definition: Mapping[str, Any], time_limit: int = LAMBDA_TIME_LIMIT_SECONDS
) -> dict[str, Any]:
    """A valid definition with ``"pool": "container"`` written into each node that names no pool and
    whose timeout is beyond ``time_limit``: what the API stores, so the engine (which parses stored
    definitions with Lambda's own limit) starts each node on the pool the API chose. A node left
    without a pool is a ``lambda`` node."""
    nodes = []
    for data in definition["nodes"]:
        node = dict(data)
        if (
            node.get("pool") is None
            and default_pool(node.get("timeout_seconds", 300), time_limit) == CONTAINER_POOL
        ):
            node["pool"] = CONTAINER_POOL
        nodes.append(node)
    return {**definition, "nodes": nodes}


def _node(index: int, data: Any, validate_node_target: Any, time_limit: int) -> Node:
    where = f"nodes[{index}]"
    if not isinstance(data, Mapping):
        raise ValidationError(f"{where} must be an object", field="nodes")
    unknown = set(data) - NODE_FIELDS
    if unknown:
        raise ValidationError(
            f"unknown fields in {where}: {', '.join(sorted(unknown))}; "
            f"allowed: {', '.join(sorted(NODE_FIELDS))}",
            field="nodes",
        )
    node_id = data.get("id")
    if not isinstance(node_id, str) or not _valid_id(node_id):
        raise ValidationError(f"{where}.id must be 1-64 of A-Z a-z 0-9 _ -, got {node_id!r}", field="id")
    if "target" not in data:
        raise ValidationError(f"node {node_id!r} needs a target", field="target")
    target = data["target"]
    if is_workflow_target(target):
        raise ValidationError(f"node {node_id!r}: a node cannot be a workflow", field="target")
    timeout = data.get("timeout_seconds", 300)
    pool = check_pool(data["pool"], where=f"node {node_id!r}: ") if data.get("pool") is not None else None
    pool = pool or default_pool(timeout, time_limit)
    check_timeout(timeout, pool, time_limit, where=f"node {node_id!r}: ")
    if validate_node_target is not None:
        try:
            validate_node_target(target, pool)
        except ValidationError as exc:
            raise ValidationError(f"node {node_id!r}: {exc.message}", field="target") from exc
    payload = data.get("payload", {})
    if not isinstance(payload, Mapping):
        raise ValidationError(f"node {node_id!r}: payload must be a JSON object", field="payload")
    reserved = {UPSTREAM_KEY, INPUT_KEY} & set(payload)
    if reserved:
        raise ValidationError(
            f"node {node_id!r}: payload keys {', '.join(sorted(reserved))} are reserved for the engine",
            field="payload",
        )
    priority = data.get("priority", "default")
    if priority not in PRIORITIES:
        raise ValidationError(
            f"node {node_id!r}: priority {priority!r} is not allowed: use {', '.join(PRIORITIES)}",
            field="priority",
        )
    depends_on = data.get("depends_on", [])
    if not isinstance(depends_on, list) or not all(isinstance(p, str) for p in depends_on):
        raise ValidationError(f"node {node_id!r}: depends_on must be a list of node ids", field="depends_on")
    if len(set(depends_on)) != len(depends_on):
        raise ValidationError(f"node {node_id!r}: depends_on lists a node twice", field="depends_on")
    if node_id in depends_on:
        raise ValidationError(f"the workflow has a cycle: {node_id} -> {node_id}", field="depends_on")
    rule = data.get("trigger_rule", TriggerRule.ALL_SUCCESS)
    try:
        trigger_rule = TriggerRule(rule)
    except ValueError:
        allowed = ", ".join(r.value for r in TriggerRule)
        raise ValidationError(
            f"node {node_id!r}: trigger_rule {rule!r} is not one of {allowed}", field="trigger_rule"
        ) from None
    try:
        retry = RetrySpec.from_dict(dict(data["retry"]) if isinstance(data.get("retry"), Mapping) else None)
    except ValidationError as exc:
        raise ValidationError(f"node {node_id!r}: {exc.message}", field="retry") from exc
    if "retry" in data and not isinstance(data["retry"], Mapping):
        raise ValidationError(f"node {node_id!r}: retry must be an object", field="retry")
    return Node(
        id=node_id,
        target=dict(target),
        payload=dict(payload),
        timeout_seconds=timeout,
        retry=retry,
        priority=priority,
        pool=pool,
        depends_on=tuple(depends_on),
        trigger_rule=trigger_rule,
    )


def _valid_id(value: str) -> bool:
    return 1 <= len(value) <= 64 and all(c.isascii() and (c.isalnum() or c in "_-") for c in value)


def find_cycle(nodes: Sequence[Node]) -> list[str]:
    """A cycle of the graph as ``[a, b, c, a]`` (following ``depends_on`` from child to parent,
    reported parent first: ``a -> b`` means ``b`` depends on ``a``), or ``[]`` if there is none."""
    parents = {n.id: n.depends_on for n in nodes}
    white, grey, black = 0, 1, 2
    color = dict.fromkeys(parents, white)
    for start in parents:
        if color[start] != white:
            continue
        stack: list[tuple[str, int]] = [(start, 0)]
        path: list[str] = [start]
        color[start] = grey
        while stack:
            node, i = stack[-1]
            deps = parents[node]
            if i < len(deps):
                stack[-1] = (node, i + 1)
                nxt = deps[i]
                if nxt not in color:
                    continue
                if color[nxt] == grey:
                    cycle = [*path[path.index(nxt) :], nxt]
                    return list(reversed(cycle))
                if color[nxt] == white:
                    color[nxt] = grey
                    stack.append((nxt, 0))
                    path.append(nxt)
            else:
                color[node] = black
                stack.pop()
                path.pop()
    return []


def _topological(nodes: Sequence[Node]) -> list[Node]:
    """Parents before children; among nodes ready together, the order of the definition."""
    done: set[str] = set()
    ordered: list[Node] = []
    remaining = list(nodes)
    while remaining:
        ready = [n for n in remaining if all(p in done for p in n.depends_on)]
        for node in ready:
            done.add(node.id)
            ordered.append(node)
        remaining = [n for n in remaining if n.id not in done]
    return ordered


# --- what a workflow run keeps ------------------------------------------------------------------

#: The parts of a node a workflow run's *structure* leaves out: they are kept once per definition
#: (content-addressed), read only when a node is started.
BODY_FIELDS = ("target", "payload")


def structure_of(workflow: Workflow) -> dict[str, Any]:
    """The small part of a definition every advance needs: ids, parents, trigger rules, timeouts,
    retry policies, priorities and pools (no targets, no payloads)."""
    return {"nodes": [{k: v for k, v in n.to_dict().items() if k not in BODY_FIELDS} for n in workflow.nodes]}


def bodies_of(workflow: Workflow) -> dict[str, dict[str, Any]]:
    """node id -> its target and payload (what a node's message needs besides its structure)."""
    return {n.id: {"target": n.target, "payload": n.payload} for n in workflow.nodes}


def workflow_from_structure(
    structure: Mapping[str, Any], bodies: Mapping[str, Mapping[str, Any]] | None = None
) -> Workflow:
    """A stored structure (already validated when the workflow was written) back as a
    :class:`Workflow`, with each node's target and payload from ``bodies`` (``{}`` without them)."""
    nodes = []
    for data in structure["nodes"]:
        body = (bodies or {}).get(data["id"], {})
        nodes.append(
            Node(
                id=data["id"],
                target=dict(body.get("target", {})),
                payload=dict(body.get("payload", {})),
                timeout_seconds=int(data.get("timeout_seconds", 300)),
                retry=RetrySpec.from_dict(data.get("retry")),
                priority=data.get("priority", "default"),
                pool=data.get("pool") or LAMBDA_POOL,  # a structure stored before nodes had pools
                depends_on=tuple(data.get("depends_on", ())),
                trigger_rule=TriggerRule(data.get("trigger_rule", TriggerRule.ALL_SUCCESS)),
            )
        )
    return Workflow(tuple(nodes))


# --- node run ids --------------------------------------------------------------------------------


def node_run_id(workflow_run_id: str, node_id: str) -> str:
    """``<workflow run id>.n<node id>``: one run per node per workflow run."""
    return f"{workflow_run_id}{NODE_SEPARATOR}{node_id}"


_NODE_KEY_RE = re.compile(r"^(\d{8}T\d{6}\.\d{3}Z(?:\.[mbr][A-Za-z0-9_-]{0,40})?)\.n([A-Za-z0-9_-]{1,64})$")


def split_node_run_key(run_key: str) -> tuple[str, str] | None:
    """``(workflow run key, node id)`` of a node run's key, or None for any other run key."""
    match = _NODE_KEY_RE.match(run_key or "")
    return (match.group(1), match.group(2)) if match else None


# --- states --------------------------------------------------------------------------------------


def node_state_of(item: Mapping[str, Any] | None) -> NodeState:
    """A node's state from its run item (None: not started, ``pending``)."""
    if item is None:
        return NodeState.PENDING
    state = item.get("state")
    if state == RunState.SKIPPED:
        reason = item.get("skip_reason")
        return NodeState(reason) if reason in {s.value for s in RECORDED_STATES} else NodeState.SKIPPED
    return NodeState(str(state))


@dataclass
class Decision:
    """What a workflow run does next (see :func:`decide`)."""

    start: list[str] = field(default_factory=list)  # nodes to start (their runs are put queued)
    record: dict[str, NodeState] = field(default_factory=dict)  # nodes that end without running
    finish: RunState | None = None  # the workflow run's final state, once every node ended
    failed_node: str | None = None  # the first node (in topological order) that failed
    states: dict[str, NodeState] = field(default_factory=dict)  # every node's state after the decision


def verdict(rule: TriggerRule, parents: Sequence[NodeState]) -> NodeState | None:
    """What a pending node with these parents' states becomes: ``QUEUED`` (it runs), a final state
    (it ends without running), or None (it keeps waiting)."""
    if not parents:
        return NodeState.QUEUED
    final = all(p in FINAL_NODE_STATES for p in parents)
    failed = any(p in _FAILED for p in parents)
    if rule is TriggerRule.ALL_DONE:
        return NodeState.QUEUED if final else None
    if rule is TriggerRule.ONE_FAILED:
        if failed:
            return NodeState.QUEUED
        return NodeState.SKIPPED if final else None
    if all(p is NodeState.SUCCEEDED for p in parents):
        return NodeState.QUEUED
    if failed:
        return NodeState.UPSTREAM_FAILED
    if any(p is NodeState.CANCELLED for p in parents):
        return NodeState.CANCELLED
    if any(p is NodeState.SKIPPED for p in parents):
        return NodeState.SKIPPED
    return None


def decide(workflow: Workflow, states: Mapping[str, NodeState], cancel: bool = False) -> Decision:
    """The next step of a workflow run whose nodes are in ``states`` (a node absent is ``pending``).

    Nodes are visited parents first, so a decision cascades in one call (a failed node's grandchildren
    are ``upstream_failed`` at once). With ``cancel`` (the workflow run was cancelled) every pending
    node ends ``cancelled``. Once every node has ended, ``finish`` is the workflow run's state:
    ``failed`` if a node failed or was upstream_failed, else ``cancelled`` if one was cancelled, else
    ``succeeded``.
    """
    out = Decision()
    current = {n.id: states.get(n.id, NodeState.PENDING) for n in workflow.nodes}
    for node in workflow.nodes:
        if current[node.id] is not NodeState.PENDING:
            continue
        if cancel:
            nxt: NodeState | None = NodeState.CANCELLED
        else:
            nxt = verdict(node.trigger_rule, [current[p] for p in node.depends_on])
        if nxt is None:
            continue
        current[node.id] = nxt
        if nxt is NodeState.QUEUED:
            out.start.append(node.id)
        else:
            out.record[node.id] = nxt
    out.states = current
    if all(s in FINAL_NODE_STATES for s in current.values()):
        failed = [i for i, s in current.items() if s is NodeState.FAILED]
        if failed or any(s is NodeState.UPSTREAM_FAILED for s in current.values()):
            out.finish = RunState.FAILED
            out.failed_node = failed[0] if failed else None
        elif any(s is NodeState.CANCELLED for s in current.values()):
            out.finish = RunState.CANCELLED
        else:
            out.finish = RunState.SUCCEEDED
    return out


def retry_plan(workflow: Workflow, states: Mapping[str, NodeState]) -> tuple[list[str], list[str]]:
    """Retrying a failed workflow run: ``(nodes to run again, nodes back to pending)``. The failed
    nodes run again (their runs are replayed); the nodes that ended without succeeding because of them
    or of a cancel (``upstream_failed``, ``skipped``, ``cancelled``) return to pending, so they are
    decided again. A succeeded node is never run again (an ``all_done`` cleanup that already succeeded
    included)."""
    failed = [i for i in workflow.ids if states.get(i) is NodeState.FAILED]
    again = (NodeState.UPSTREAM_FAILED, NodeState.SKIPPED, NodeState.CANCELLED)
    reset = [i for i in workflow.ids if states.get(i) in again]
    return failed, reset


def node_payload(
    node: Node, upstream: Mapping[str, Mapping[str, Any]], workflow_input: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The payload a node's run gets: its own, plus ``upstream`` (each parent's run id and output, or
    the S3 reference of an output kept there) for a node with parents, plus ``workflow_input`` (the
    workflow run's payload) when that is not empty. If that is over the payload limit, the parents'
    inline outputs are left out (their ``run_id`` stays: ``GET /runs/{id}/output`` reads them) and
    ``outputs_omitted`` is true."""
    payload = dict(node.payload)
    if workflow_input:
        payload[INPUT_KEY] = dict(workflow_input)
    if node.depends_on:
        payload[UPSTREAM_KEY] = {p: dict(upstream.get(p, {})) for p in node.depends_on}
        if payload_size(payload) > MAX_PAYLOAD_BYTES:
            payload[UPSTREAM_KEY] = {
                p: {k: v for k, v in dict(upstream.get(p, {})).items() if k != "output"}
                for p in node.depends_on
            }
            payload["outputs_omitted"] = True
    return payload


def draw(workflow: Workflow, states: Mapping[str, NodeState] | None = None) -> str:
    """The DAG as text, one line per node with its state, children indented under their parents::

        extract [succeeded]
        ├── transform [failed]
        │   └── load [upstream_failed]  <- transform, audit
        └── audit [succeeded]
            └── load (see above)

    A node with several parents is drawn under the first one reached, with ``<- parents``, and named
    ``(see above)`` under the others. Without ``states`` (a definition, not a run) no state is shown."""
    lines: list[str] = []
    seen: set[str] = set()

    def visit(node_id: str, prefix: str, last: bool, root: bool) -> None:
        connector = "" if root else ("└── " if last else "├── ")
        if node_id in seen:
            lines.append(f"{prefix}{connector}{node_id} (see above)")
            return
        seen.add(node_id)
        node = workflow.node(node_id)
        label = node_id if states is None else f"{node_id} [{states.get(node_id, NodeState.PENDING)}]"
        if len(node.depends_on) > 1:
            label += "  <- " + ", ".join(node.depends_on)
        lines.append(prefix + connector + label)
        children = workflow.children(node_id)
        inner = prefix if root else prefix + ("    " if last else "│   ")
        for i, child in enumerate(children):
            visit(child, inner, i == len(children) - 1, False)

    for node in workflow.nodes:
        if not node.depends_on:
            visit(node.id, "", True, True)
    return "\n".join(lines)
