"""DAG workflows end to end (on the in-memory fakes): a workflow is a job, its runs go through the
dispatcher's queues and the real worker, each node is a run (docs/semantics/workflows.md)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from jobsched.core.dag import node_run_id
from jobsched.core.errors import ConflictError, NotFoundError, ValidationError
from jobsched.core.models import RunState
from jobsched.services.deliveries import Delivery
from tests.aws.conftest_worker import sent_messages
from tests.aws.memory import memory_aws  # noqa: F401  (this file runs on the in-memory fakes)
from tests.aws.workflow_kit import EXECUTIONS, WorkflowKit, node


@pytest.fixture
def kit(aws, clock) -> WorkflowKit:
    return WorkflowKit(aws, clock)


def _executions_per_node(run_id: str, node_ids: list[str]) -> dict[str, int]:
    return {n: EXECUTIONS[node_run_id(run_id, n)] for n in node_ids}


def test_fan_out_runs_every_child_once_after_the_root(kit):
    """Given a root with three children
    When the workflow is triggered and the queues drained
    Then each node ran exactly once, the children after the root, and the workflow run succeeded."""
    wf = kit.create(
        [
            node("root"),
            node("a", "wf.echo", "root"),
            node("b", "wf.echo", "root"),
            node("c", "wf.echo", "root"),
        ]
    )
    run = kit.trigger(wf.id)
    kit.drain()
    view = kit.view(run.id)
    assert view.run.state is RunState.SUCCEEDED
    assert kit.states(run.id) == dict.fromkeys(["root", "a", "b", "c"], "succeeded")
    assert _executions_per_node(run.id, ["root", "a", "b", "c"]) == {"root": 1, "a": 1, "b": 1, "c": 1}
    assert view.nodes["a"].started_at >= view.nodes["root"].finished_at


def test_fan_in_child_sees_every_parent_output_and_runs_once_when_parents_finish_together(kit):
    """Given two parents whose messages are handled in one batch on two threads, and a child of both
    When the workflow runs
    Then the child ran once and its payload carries both parents' run ids and outputs."""
    wf = kit.create(
        [
            node("left", "wf.echo", payload={"value": 1}),
            node("right", "wf.echo", payload={"value": 2}),
            node("join", "wf.echo", "left", "right"),
        ]
    )
    run = kit.trigger(wf.id, payload={"day": "2026-03-02"})
    kit.drain(concurrency=2)
    assert kit.view(run.id).run.state is RunState.SUCCEEDED
    assert _executions_per_node(run.id, ["left", "right", "join"]) == {"left": 1, "right": 1, "join": 1}
    payload = kit.node_payload_of(run.id, "join")
    assert payload["workflow_input"] == {"day": "2026-03-02"}
    assert payload["upstream"]["left"]["run_id"] == node_run_id(run.id, "left")
    assert payload["upstream"]["left"]["output"]["value"] == 1
    assert payload["upstream"]["right"]["output"]["value"] == 2


def test_two_advances_after_both_parents_succeeded_start_the_child_once(kit):
    """Given both parents of a child have succeeded but nothing advanced the workflow run yet
    When two advances run (each parent's, as if they finished at the same instant)
    Then one child run exists and one message was sent for it."""
    wf = kit.create([node("p1"), node("p2"), node("child", "wf.echo", "p1", "p2")])
    run = kit.trigger(wf.id)
    engine = kit.engine
    original = engine.on_finished
    engine.on_finished = lambda *a, **k: None  # parents finish without advancing
    kit.worker.on_finished = engine.on_finished
    kit.drain()
    assert kit.states(run.id) == {"p1": "succeeded", "p2": "succeeded", "child": "pending"}
    job_id, key = run.job_id, run.run_key
    seen = engine.read(job_id, key)  # both advances read the states before either writes
    engine.read = lambda *_: seen
    first = engine.advance(job_id, key, kit.clock.now())
    second = engine.advance(job_id, key, kit.clock.now())
    del engine.read
    assert first.start == ["child"] and second.start == ["child"]  # both decided it...
    child = node_run_id(run.id, "child")
    sent = [body for body, _ in sent_messages(kit.aws) if body["run_id"] == child]
    assert len(sent) == 1  # ...one put created it and sent its message
    kit.worker.on_finished = original
    kit.drain()
    assert EXECUTIONS[node_run_id(run.id, "child")] == 1
    assert kit.view(run.id).run.state is RunState.SUCCEEDED


def test_diamond_runs_each_node_once_in_order(kit):
    """Given a diamond a -> (b, c) -> d
    When it runs
    Then d starts after both b and c, every node ran once, the workflow run succeeded."""
    wf = kit.create(
        [node("a"), node("b", "wf.echo", "a"), node("c", "wf.echo", "a"), node("d", "wf.echo", "b", "c")]
    )
    run = kit.trigger(wf.id)
    kit.drain(concurrency=2)
    view = kit.view(run.id)
    assert view.run.state is RunState.SUCCEEDED
    assert _executions_per_node(run.id, list("abcd")) == dict.fromkeys("abcd", 1)
    assert view.nodes["d"].started_at >= max(view.nodes["b"].finished_at, view.nodes["c"].finished_at)


def test_a_failing_middle_node_marks_its_descendants_upstream_failed_and_the_run_failed(kit):
    """Given a -> b(fails) -> d -> e, a -> c -> d, a cleanup node (all_done) and a compensation node
    (one_failed) after b, and a one_failed node after c
    When it runs
    Then b failed (a dead letter naming its node run), d and e are upstream_failed without running,
    c succeeded, cleanup and compensate ran, the one_failed node after c is skipped, and the workflow
    run failed with an error naming b."""
    wf = kit.create(
        [
            node("a"),
            node("b", "wf.fail", "a", payload={"message": "disk full"}),
            node("c", "wf.echo", "a"),
            node("d", "wf.echo", "b", "c"),
            node("e", "wf.echo", "d"),
            node("cleanup", "wf.echo", "b", trigger_rule="all_done"),
            node("compensate", "wf.echo", "b", trigger_rule="one_failed"),
            node("alarm", "wf.echo", "c", trigger_rule="one_failed"),
        ]
    )
    run = kit.trigger(wf.id)
    kit.drain()
    view = kit.view(run.id)
    assert kit.states(run.id) == {
        "a": "succeeded",
        "b": "failed",
        "c": "succeeded",
        "d": "upstream_failed",
        "e": "upstream_failed",
        "cleanup": "succeeded",
        "compensate": "succeeded",
        "alarm": "skipped",
    }
    assert EXECUTIONS[node_run_id(run.id, "d")] == 0 and EXECUTIONS[node_run_id(run.id, "e")] == 0
    assert view.run.state is RunState.FAILED
    assert "node 'b' failed" in view.run.error and "disk full" in view.run.error
    assert view.item["wf_failed_node"] == "b"
    dead, _ = kit.jobs.runs.list_dead_letters("acme")
    assert [d.id for d in dead] == [node_run_id(run.id, "b")]
    assert dead[0].wf_node == "b"


def test_retry_from_failed_reruns_only_the_failed_node_and_what_it_stopped(kit):
    """Given a -> b (fails on its first execution) -> c, and a -> d
    When the failed workflow run is retried
    Then a and d are not run again, b runs again and succeeds, c runs, the run succeeds, and the retry
    is recorded on the workflow run and on b's run."""
    wf = kit.create(
        [
            node("a"),
            node("b", "wf.flaky", "a", payload={"failures": 1}),
            node("c", "wf.echo", "b"),
            node("d", "wf.echo", "a"),
        ]
    )
    run = kit.trigger(wf.id)
    kit.drain()
    assert kit.view(run.id).run.state is RunState.FAILED
    assert kit.states(run.id)["c"] == "upstream_failed"
    kit.clock.advance(seconds=10)
    kit.service.retry("acme", run.id, kit.clock.now())
    kit.drain()
    view = kit.view(run.id)
    assert view.run.state is RunState.SUCCEEDED
    assert _executions_per_node(run.id, list("abcd")) == {"a": 1, "b": 2, "c": 1, "d": 1}
    assert view.retries == [{"at": "2026-03-02T12:00:10.000Z", "failed": ["b"], "reset": ["c"]}]
    assert [r["action"] for r in view.nodes["b"].replays] == ["workflow_retry"]
    with pytest.raises(ConflictError):
        kit.service.retry("acme", run.id, kit.clock.now())  # only a failed workflow run retries


def test_cancel_mid_run_cancels_queued_and_pending_nodes(kit):
    """Given a -> b -> c where a has succeeded and b is queued
    When the workflow run is cancelled
    Then b and c end cancelled without running, and the workflow run is cancelled."""
    wf = kit.create([node("a"), node("b", "wf.echo", "a"), node("c", "wf.echo", "b")])
    run = kit.trigger(wf.id)
    kit.drain(until=lambda: kit.states(run.id)["b"] == "queued")
    kit.service.cancel("acme", run.id, kit.clock.now())
    kit.drain()
    view = kit.view(run.id)
    assert kit.states(run.id) == {"a": "succeeded", "b": "cancelled", "c": "cancelled"}
    assert view.run.state is RunState.CANCELLED
    assert EXECUTIONS[node_run_id(run.id, "b")] == 0


def test_cancel_reaches_a_running_node_through_its_flag(kit):
    """Given a -> b where a is running (a handler that waits until cancelled)
    When the workflow run is cancelled while a runs
    Then a sees the flag and ends cancelled, b is cancelled, the workflow run is cancelled."""
    wf = kit.create([node("a", "wf.wait", payload={"seconds": 20}), node("b", "wf.echo", "a")])
    run = kit.trigger(wf.id)
    import threading

    worker_thread = threading.Thread(target=kit.drain)
    worker_thread.start()
    for _ in range(200):
        if kit.states(run.id)["a"] == "running":
            break
        threading.Event().wait(0.05)
    kit.service.cancel("acme", run.id, kit.clock.now())
    worker_thread.join(timeout=15)
    assert not worker_thread.is_alive()
    assert kit.states(run.id) == {"a": "cancelled", "b": "cancelled"}
    assert kit.view(run.id).run.state is RunState.CANCELLED


def test_a_crash_between_a_node_success_and_its_children_start_is_completed_by_the_sweeper(kit):
    """Given a -> (b, c) where the worker dies after a succeeded, before it advanced the workflow run
    When the sweeper runs after its grace period
    Then b and c are started once each and the workflow run succeeds; a second sweep starts nothing."""
    wf = kit.create([node("a"), node("b", "wf.echo", "a"), node("c", "wf.echo", "a")])
    run = kit.trigger(wf.id)

    def crash(*_a, **_k):
        raise RuntimeError("worker died after the node's success write")

    kit.worker.on_finished = crash
    kit.drain()
    assert kit.states(run.id) == {"a": "succeeded", "b": "pending", "c": "pending"}
    kit.worker.on_finished = kit.engine.on_finished
    kit.clock.advance(minutes=3)
    kit.sweeper.sweep(kit.clock.now())
    kit.sweeper.sweep(kit.clock.now())
    kit.drain()
    assert kit.view(run.id).run.state is RunState.SUCCEEDED
    assert _executions_per_node(run.id, list("abc")) == {"a": 1, "b": 1, "c": 1}


def test_a_duplicate_delivery_of_a_finished_node_completes_a_crashed_advance(kit):
    """Given a -> b where the advance after a's success was lost, and a's message comes again
    When that duplicate is delivered
    Then b starts (once) and the run succeeds."""
    wf = kit.create([node("a"), node("b", "wf.echo", "a")])
    run = kit.trigger(wf.id)
    kit.drain(until=lambda: kit.states(run.id)["a"] == "queued")
    deliveries = kit.receive()
    (a_message,) = [d for d in deliveries if node_run_id(run.id, "a") in d.body]
    kit.worker.on_finished = None
    kit.handle(a_message)
    kit.worker.on_finished = kit.engine.on_finished
    assert kit.states(run.id)["b"] == "pending"
    kit.deliveries.handle(
        Delivery.of(a_message.body), kit.clock.now()
    )  # the duplicate: FINISHED, then advanced
    kit.drain()
    assert kit.view(run.id).run.state is RunState.SUCCEEDED
    assert _executions_per_node(run.id, ["a", "b"]) == {"a": 1, "b": 1}


def test_another_tenants_workflow_and_workflow_run_are_not_found(kit):
    """Given a workflow of tenant acme and one of its runs
    When tenant globex asks for them
    Then both answer not found."""
    wf = kit.create([node("a")])
    run = kit.trigger(wf.id)
    with pytest.raises(NotFoundError):
        kit.service.get("globex", wf.id)
    with pytest.raises(NotFoundError):
        kit.service.run("globex", run.id)
    with pytest.raises(NotFoundError):
        kit.service.cancel("globex", run.id, kit.clock.now())


def test_a_plain_job_is_not_a_workflow_and_node_runs_stay_out_of_the_run_list(kit):
    """Given a plain job and a finished workflow run
    When the job is read as a workflow, and the workflow's runs are listed
    Then the job is not found, and the list holds the workflow run only (not its node runs)."""
    plain = kit.jobs.create(
        "acme", {"name": "p", "schedule": "@daily", "target": {"handler": "wf.echo"}}, kit.clock.now()
    )
    with pytest.raises(NotFoundError):
        kit.service.get("acme", plain.id)
    wf = kit.create([node("a"), node("b", "wf.echo", "a")])
    run = kit.trigger(wf.id)
    kit.drain()
    runs, _ = kit.service.runs("acme", wf.id)
    assert [r.id for r in runs] == [run.id]


def test_a_queued_workflow_run_shows_every_node_pending_and_cancels_at_once(kit):
    """Given a triggered workflow run no worker has taken yet
    When it is read and then cancelled
    Then every node is pending, and the run ends cancelled."""
    wf = kit.create([node("a"), node("b", "wf.echo", "a")])
    run = kit.trigger(wf.id)
    assert kit.states(run.id) == {"a": "pending", "b": "pending"}
    view = kit.service.cancel("acme", run.id, kit.clock.now())
    assert view.run.state is RunState.CANCELLED
    kit.drain()
    assert EXECUTIONS == {}


def test_a_scheduled_workflow_is_dispatched_like_any_job(kit):
    """Given a workflow on a per-minute schedule
    When the dispatcher ticks at its due instant
    Then a workflow run is created and its node runs."""
    wf = kit.create([node("a")], schedule="* * * * *")
    kit.clock.advance(seconds=60)
    kit.jobs.dispatcher.dispatch_shard(kit.jobs.dispatcher.shard_of(wf.id), kit.clock.now())
    kit.drain()
    runs, _ = kit.service.runs("acme", wf.id)
    assert runs and runs[-1].state is RunState.SUCCEEDED
    assert EXECUTIONS[node_run_id(runs[-1].id, "a")] == 1


@pytest.mark.parametrize(
    ("nodes", "message"),
    [
        ([node("a"), node("a")], "duplicate node id 'a'"),
        ([node("a", "wf.echo", "ghost")], "node 'a' depends on unknown node 'ghost'"),
        ([node("a", "wf.echo", "c"), node("b", "wf.echo", "a"), node("c", "wf.echo", "b")], "cycle: "),
        ([node("a", "no.such.handler")], "unknown handler"),
        ([], "non-empty"),
    ],
)
def test_bad_definitions_are_refused_and_write_nothing(kit, nodes, message):
    """Given an invalid definition
    When it is created
    Then a ValidationError names the problem and no job is stored."""
    with pytest.raises(ValidationError) as refused:
        kit.create(nodes)
    assert message in refused.value.message
    assert kit.jobs.list("acme")[0] == []


def test_advance_after_the_workflow_run_ended_does_nothing(kit):
    """Given a finished workflow run
    When it is advanced again
    Then nothing is decided."""
    wf = kit.create([node("a")])
    run = kit.trigger(wf.id)
    kit.drain()
    assert kit.engine.advance(run.job_id, run.run_key, kit.clock.now() + timedelta(seconds=1)) is None
