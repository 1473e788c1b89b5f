"""The pure DAG rules: definitions, cycles, trigger rules, decisions, retry plans, node payloads."""

from __future__ import annotations

import itertools

import pytest

from jobsched.core.dag import (
    MAX_EDGES,
    MAX_NODES,
    NodeState,
    TriggerRule,
    decide,
    node_payload,
    node_run_id,
    parse_workflow,
    retry_plan,
    split_node_run_key,
    verdict,
)
from jobsched.core.errors import PayloadTooLargeError, ValidationError
from jobsched.core.ids import parse_run_id
from jobsched.core.job_specs import validate_target
from jobsched.core.models import RunState
from jobsched.testing.handlers import StaticCatalog

S, F, UF, SK, C, P, R = (
    NodeState.SUCCEEDED,
    NodeState.FAILED,
    NodeState.UPSTREAM_FAILED,
    NodeState.SKIPPED,
    NodeState.CANCELLED,
    NodeState.PENDING,
    NodeState.RUNNING,
)


def n(node_id: str, *deps: str, **extra):
    return {"id": node_id, "target": {"handler": "h"}, "depends_on": list(deps), **extra}


def wf(*nodes):
    return parse_workflow({"nodes": list(nodes)})


def test_nodes_come_out_parents_first():
    """Given nodes listed children first
    When parsed
    Then they are in topological order."""
    assert wf(n("d", "b", "c"), n("b", "a"), n("c", "a"), n("a")).ids == ["a", "b", "c", "d"]


@pytest.mark.parametrize(
    ("nodes", "message"),
    [
        ([n("a", "c"), n("b", "a"), n("c", "b")], "the workflow has a cycle: a -> b -> c -> a"),
        ([n("a", "a")], "the workflow has a cycle: a -> a"),
        ([n("a"), n("b", "c"), n("c", "b")], "the workflow has a cycle: "),
        ([n("a"), n("a")], "duplicate node id 'a'"),
        ([n("a", "zz")], "node 'a' depends on unknown node 'zz'"),
        ([n("a", trigger_rule="one_success")], "trigger_rule 'one_success' is not one of"),
        ([n("a", payload={"upstream": 1})], "reserved for the engine"),
        # 901 s names lambda: a node without a pool would go to the container pool (issue 30)
        (
            [n("a", timeout_seconds=901, pool="lambda")],
            "timeout_seconds must be a whole number between 1 and 900",
        ),
        ([n("a", timeout_seconds=43201, pool="container")], "between 1 and 43200 on the container pool"),
        ([n("a", pool="fargate")], "pool 'fargate' is not allowed: use lambda, long, container"),
        ([n("bad id")], "nodes[0].id must be 1-64"),
        ([{"id": "a"}], "node 'a' needs a target"),
        ([n("a", extra=1)], "unknown fields in nodes[0]: extra"),
        ([n("a", retry={"max_attempts": 0})], "node 'a': retry.max_attempts must be 1..100"),
    ],
)
def test_invalid_definitions_name_what_is_wrong(nodes, message):
    """Given an invalid definition
    When parsed
    Then the error says what is wrong (a cycle names its nodes, in order)."""
    with pytest.raises(ValidationError) as refused:
        parse_workflow({"nodes": nodes})
    assert message in refused.value.message


def test_a_cycle_is_reported_in_dependency_order():
    """Given extract <- transform <- load <- extract
    When parsed
    Then the cycle reads parent -> child along the edges."""
    nodes = [n("extract", "load"), n("transform", "extract"), n("load", "transform")]
    with pytest.raises(ValidationError) as refused:
        parse_workflow({"nodes": nodes})
    cycle = refused.value.message.split(": ", 1)[1].split(" -> ")
    assert cycle[0] == cycle[-1] and set(cycle) == {"extract", "transform", "load"}
    for parent, child in itertools.pairwise(cycle):
        assert parent in {x["id"]: x["depends_on"] for x in nodes}[child]


def test_size_limits():
    """Given too many nodes, too many edges, or a definition over 64 KiB
    When parsed
    Then each is refused with its limit."""
    with pytest.raises(ValidationError, match=f"at most {MAX_NODES} nodes"):
        wf(*[n(f"n{i}") for i in range(MAX_NODES + 1)])
    many = [n(f"r{i}") for i in range(26)] + [n(f"c{j}", *[f"r{i}" for i in range(26)]) for j in range(20)]
    assert sum(len(x["depends_on"]) for x in many) > MAX_EDGES
    with pytest.raises(ValidationError, match=f"at most {MAX_EDGES} edges"):
        wf(*many)
    with pytest.raises(PayloadTooLargeError):
        wf(n("a", payload={"blob": "x" * 70_000}))


def test_node_targets_are_checked_like_job_targets():
    """Given a workflow job target whose node names an unknown handler
    When validated as a job target
    Then the node and the handler are named."""
    target = {"workflow": {"nodes": [n("a")]}}
    validate_target(target, StaticCatalog({"h"}))
    with pytest.raises(ValidationError, match="node 'a': unknown handler 'h'"):
        validate_target(target, StaticCatalog(set()))
    with pytest.raises(ValidationError, match="a node cannot be a workflow"):
        validate_target({"workflow": {"nodes": [{"id": "a", "target": target}]}}, None)


@pytest.mark.parametrize(
    ("rule", "parents", "expected"),
    [
        (TriggerRule.ALL_SUCCESS, [], NodeState.QUEUED),
        (TriggerRule.ALL_SUCCESS, [S, S], NodeState.QUEUED),
        (TriggerRule.ALL_SUCCESS, [S, R], None),
        (TriggerRule.ALL_SUCCESS, [F, R], UF),
        (TriggerRule.ALL_SUCCESS, [UF, S], UF),
        (TriggerRule.ALL_SUCCESS, [C, S], C),
        (TriggerRule.ALL_SUCCESS, [SK, S], SK),
        (TriggerRule.ALL_DONE, [F, S], NodeState.QUEUED),
        (TriggerRule.ALL_DONE, [F, R], None),
        (TriggerRule.ONE_FAILED, [F, R], NodeState.QUEUED),
        (TriggerRule.ONE_FAILED, [S, S], SK),
        (TriggerRule.ONE_FAILED, [S, R], None),
    ],
)
def test_trigger_rules(rule, parents, expected):
    """Given a pending node's rule and its parents' states
    When judged
    Then it runs, ends, or waits as the table says."""
    assert verdict(rule, parents) == expected


def test_a_failure_cascades_through_descendants_in_one_decision():
    """Given a -> b -> c -> d with b failed
    When decided
    Then c and d are upstream_failed at once and the run failed, naming b."""
    flow = wf(n("a"), n("b", "a"), n("c", "b"), n("d", "c"))
    decision = decide(flow, {"a": S, "b": F})
    assert decision.record == {"c": UF, "d": UF}
    assert decision.finish is RunState.FAILED and decision.failed_node == "b"


def test_cancel_ends_every_pending_node_and_waits_for_running_ones():
    """Given a cancelled run with a running node and pending ones
    When decided
    Then the pending nodes are cancelled and the run is not over until the running node ends."""
    flow = wf(n("a"), n("b", "a"), n("c"))
    decision = decide(flow, {"a": R}, cancel=True)
    assert decision.record == {"b": C, "c": C} and decision.finish is None
    assert decide(flow, {"a": C, "b": C, "c": C}, cancel=True).finish is RunState.CANCELLED
    assert decide(flow, {"a": S, "b": S, "c": S}, cancel=True).finish is RunState.SUCCEEDED


def test_retry_plan_reruns_failed_nodes_and_resets_what_they_stopped_but_no_succeeded_node():
    """Given a failed node b with an upstream_failed child, an all_done cleanup that succeeded after
    it, a skipped one_failed node and an unrelated succeeded branch
    When a retry is planned
    Then b runs again, its child and the skipped node return to pending, no succeeded node does."""
    flow = wf(
        n("a"),
        n("b", "a"),
        n("c", "b"),
        n("cleanup", "b", trigger_rule="all_done"),
        n("d", "a"),
        n("alarm", "d", trigger_rule="one_failed"),
    )
    failed, reset = retry_plan(flow, {"a": S, "b": F, "c": UF, "cleanup": S, "d": S, "alarm": SK})
    assert failed == ["b"] and reset == ["c", "alarm"]


def test_node_run_ids_parse_back_to_their_run_key_and_node():
    """Given a workflow run id (scheduled or manual)
    When a node run id is derived
    Then it is a valid run id whose key splits into the workflow run key and the node."""
    for run_id in ("jabc.20260302T120000.000Z", "jabc.20260302T120000.000Z.mXyZ"):
        job_id, key = parse_run_id(node_run_id(run_id, "load"))
        assert job_id == "jabc"
        assert split_node_run_key(key) == (run_id.split(".", 1)[1], "load")
    assert split_node_run_key("20260302T120000.000Z.mXyZ") is None


def test_node_payload_carries_upstream_outputs_and_drops_them_when_too_large():
    """Given a child of two parents
    When its payload is built with small, then huge outputs
    Then it has the outputs, then only their run ids with outputs_omitted."""
    flow = wf(n("p"), n("q"), n("child", "p", "q", payload={"k": 1}))
    child = flow.node("child")
    small = node_payload(
        child, {"p": {"run_id": "r1", "output": 1}, "q": {"run_id": "r2", "output_ref": "s3"}}, {"x": 1}
    )
    assert small == {
        "k": 1,
        "workflow_input": {"x": 1},
        "upstream": {"p": {"run_id": "r1", "output": 1}, "q": {"run_id": "r2", "output_ref": "s3"}},
    }
    huge = node_payload(child, {"p": {"run_id": "r1", "output": "x" * 70_000}, "q": {"run_id": "r2"}}, None)
    assert (
        huge["upstream"] == {"p": {"run_id": "r1"}, "q": {"run_id": "r2"}} and huge["outputs_omitted"] is True
    )
    assert node_payload(flow.node("p"), {}, None) == {}
