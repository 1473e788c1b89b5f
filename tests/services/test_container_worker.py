"""The container worker loop (jobsched/compose/container_worker.py) on the in-memory fakes, with a fixed
clock: the worker path per message, the whole timeout, the graceful stop and its hand-back, and the ECS
scale-in protection against a local HTTP server standing in for the agent."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from jobsched.aws.metering import dynamo_for
from jobsched.aws.queues import QueueConsumer
from jobsched.aws.runs_store import RunsStore
from jobsched.aws.task_protection import TaskProtection
from jobsched.compose.container_worker import ContainerWorker, LoopConfig, container_worker_from_settings
from jobsched.core.messages import RunMessage
from jobsched.core.models import RetrySpec, Run, RunState, make_run_id
from jobsched.runtime.resources import CONTAINER_KIND
from jobsched.targets.registry import job
from tests.aws.memory import memory_aws_units  # noqa: F401  (on the in-memory fakes)

#: What the handlers below saw: per run id, the timeouts, attempts and effects.
SEEN: dict[str, list[dict[str, Any]]] = {}
GO = threading.Event()  # set by a test: the blocking handler may return
STARTED = threading.Event()  # set by the blocking handler when it runs


@job("container_test.quick")
def quick(payload: dict, ctx: Any) -> dict:
    SEEN.setdefault(ctx.run_id, []).append({"timeout": ctx.timeout_seconds, "attempt": ctx.attempt})
    return {"ok": True}


@job("container_test.long")
def long_running(payload: dict, ctx: Any) -> dict:
    """Charges once per run (an idempotent effect), then works until told to go or to stop."""
    ctx.idempotent("charge", lambda: SEEN.setdefault(ctx.run_id + ":charge", []).append(ctx.attempt) or "ok")
    SEEN.setdefault(ctx.run_id, []).append({"attempt": ctx.attempt})
    STARTED.set()
    while not GO.is_set():
        if ctx.cancelled:
            return {"stopped": True}
        time.sleep(0.01)
    return {"done": True}


@pytest.fixture(autouse=True)
def _reset() -> Iterator[None]:
    SEEN.clear()
    GO.clear()
    STARTED.clear()
    yield
    GO.set()


def wait_for(predicate: Callable[[], Any], timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.01)
    return value


def queue_run(aws, clock, job_id: str, handler: str, *, timeout: int = 3600) -> RunMessage:
    """A queued run and its message on the container queue (what the dispatcher does for the pool)."""
    at = clock.now()
    run = Run(
        id=make_run_id(job_id, at), job_id=job_id, tenant="acme", scheduled_at=at, due_at=at, created_at=at
    )
    RunsStore(dynamo_for(aws.settings, aws.clients.dynamodb), aws.settings.runs_table).create(run)
    msg = RunMessage(
        run_id=run.id, job_id=job_id, tenant="acme", attempt=1, scheduled_at=at, due_at=at,
        target={"handler": handler}, timeout_seconds=timeout, pool="container",
        retry=RetrySpec(max_attempts=1),
    )  # fmt: skip
    aws.clients.sqs.send_message(
        QueueUrl=aws.settings.queue_urls[CONTAINER_KIND], MessageBody=msg.to_json(), MessageGroupId="acme"
    )
    return msg


def loop_for(
    aws, clock, owner: str, *, stop_timeout: float = 5.0, protection=None, lease_seconds: float = 60.0
) -> ContainerWorker:
    config = LoopConfig(
        concurrency=2, stop_timeout_seconds=stop_timeout, wait_seconds=0, lease_seconds=lease_seconds
    )
    loop = container_worker_from_settings(aws.settings, aws.clients, config=config, clock=clock, owner=owner)
    if protection is not None:
        loop.protection = protection
    return loop


def run_of(aws, run_id: str) -> Run:
    return RunsStore(dynamo_for(aws.settings, aws.clients.dynamodb), aws.settings.runs_table).get(run_id)


def queued(aws) -> list[dict]:
    return aws.clients.sqs.peek(aws.settings.queue_urls[CONTAINER_KIND])


def visible(aws) -> int:
    """Messages of the container queue that a receive would get now."""
    answer = aws.clients.sqs.get_queue_attributes(
        QueueUrl=aws.settings.queue_urls[CONTAINER_KIND], AttributeNames=["ApproximateNumberOfMessages"]
    )
    return int(answer["Attributes"]["ApproximateNumberOfMessages"])


def test_a_run_on_the_container_queue_gets_its_whole_timeout_and_its_message_is_deleted(aws, clock):
    # Given a run whose timeout (1 h) is far beyond Lambda's 15 minutes, on the container queue
    msg = queue_run(aws, clock, "job-quick", "container_test.quick", timeout=3600)
    loop = loop_for(aws, clock, "container:a")
    # When the loop runs until the run ended, then stops
    loop.start()
    wait_for(lambda: run_of(aws, msg.run_id).state is RunState.SUCCEEDED)
    assert loop.stop() == []
    # Then the handler had its whole timeout, once, and the message is gone
    assert SEEN[msg.run_id] == [{"timeout": 3600.0, "attempt": 1}]
    wait_for(lambda: queued(aws) == [])
    assert [o.status for o in loop.outcomes] == ["succeeded"]


def test_a_malformed_message_is_left_to_the_queue_for_its_redrive(aws, clock):
    # Given a body that is no run message
    url = aws.settings.queue_urls[CONTAINER_KIND]
    aws.clients.sqs.send_message(QueueUrl=url, MessageBody="{not json", MessageGroupId="acme")
    loop = loop_for(aws, clock, "container:a")
    # When the loop receives it
    loop.start()
    wait_for(lambda: [m for m in queued(aws) if m["receives"] >= 1] and loop.in_progress == 0)
    loop.stop()
    # Then it is not deleted: SQS delivers it again, and redrives it to the DLQ after maxReceiveCount
    assert [m["body"] for m in queued(aws)] == ["{not json"]


def test_a_stop_lets_a_run_finish_within_the_stop_timeout(aws, clock):
    # Given a long run in progress
    msg = queue_run(aws, clock, "job-long", "container_test.long")
    loop = loop_for(aws, clock, "container:a", stop_timeout=10)
    loop.start()
    assert STARTED.wait(10)
    # When the stop begins and the run ends within the stop timeout
    threading.Timer(0.2, GO.set).start()
    handed = loop.stop()
    # Then nothing is handed back: the run succeeded on its first attempt and its message is deleted
    assert handed == []
    assert run_of(aws, msg.run_id).state is RunState.SUCCEEDED
    wait_for(lambda: queued(aws) == [])


@pytest.mark.parametrize("lease_seconds", [60.0, 9.0])
def test_a_run_is_claimed_for_the_loops_lease(aws, clock, lease_seconds):
    # Given a loop with a lease of `lease_seconds` (--lease-seconds; 60 by default, as on Lambda)
    msg = queue_run(aws, clock, "job-long", "container_test.long")
    loop = loop_for(aws, clock, "container:a", lease_seconds=lease_seconds)
    loop.start()
    try:
        # When it claims a run
        assert STARTED.wait(10)
        claimed = run_of(aws, msg.run_id)
    finally:
        GO.set()
        loop.stop()
    # Then the run's lease ends that long after the claim (the fixed clock's now)
    assert claimed.lease_owner == "container:a"
    assert claimed.lease_until == clock.now() + timedelta(seconds=lease_seconds)


@pytest.mark.parametrize("lease_seconds", [2.9, 0.0, 3600.5])
def test_a_lease_outside_3_to_3600_seconds_is_refused(lease_seconds):
    with pytest.raises(ValueError, match="the lease must be 3 to 3600 seconds"):
        LoopConfig(lease_seconds=lease_seconds)


def test_a_run_still_running_at_the_stop_timeout_is_handed_back_and_finished_by_another_worker(aws, clock):
    # Given a long run in progress on worker a
    msg = queue_run(aws, clock, "job-long", "container_test.long")
    first = loop_for(aws, clock, "container:a", stop_timeout=0.2)
    first.start()
    assert STARTED.wait(10)
    # When worker a stops and the run outlasts its stop timeout
    handed = first.stop()
    # Then the run is handed back: still running, no owner, its attempt unused, its message visible
    assert handed == [msg.run_id]
    given_up = run_of(aws, msg.run_id)
    assert (given_up.state, given_up.attempt, given_up.lease_owner) == (RunState.RUNNING, 1, None)
    assert [m["receives"] for m in queued(aws)] == [1] and visible(aws) == 1
    # and the handler was told to stop, without a write of its own (its outcome: handed back)
    wait_for(lambda: [o.status for o in first.outcomes] == ["handed_back"])
    # When worker b receives the message and the run completes
    STARTED.clear()
    second = loop_for(aws, clock, "container:b")
    second.start()
    assert STARTED.wait(10)
    GO.set()
    wait_for(lambda: run_of(aws, msg.run_id).state is RunState.SUCCEEDED)
    second.stop()
    # Then the same attempt ran again, the effect happened once, and the history says so
    done = run_of(aws, msg.run_id)
    assert [(a.attempt, a.outcome) for a in done.attempts] == [(1, "handed_back"), (1, "succeeded")]
    assert SEEN[msg.run_id] == [{"attempt": 1}, {"attempt": 1}]
    assert SEEN[msg.run_id + ":charge"] == [1]
    wait_for(lambda: queued(aws) == [])


def test_a_message_received_once_the_stop_began_is_made_visible_again(aws, clock):
    # Given a loop whose receive is in flight when the stop begins (the signal comes during a long poll)
    msg = queue_run(aws, clock, "job-quick", "container_test.quick")
    loop = loop_for(aws, clock, "container:a")
    receive = loop.consumer.receive

    def receive_then_signal(count: int, wait: int) -> list:
        got = receive(count, wait)
        loop.request_stop()
        return got

    loop.consumer.receive = receive_then_signal  # type: ignore[method-assign]
    # When the receiver gets the message
    loop.start()
    wait_for(lambda: loop._receiver is not None and not loop._receiver.is_alive())
    loop.stop()
    # Then the run is not started and its message can be received at once
    assert msg.run_id not in SEEN
    assert ([m["receives"] for m in queued(aws)], visible(aws)) == ([1], 1)


# --- scale-in protection ---------------------------------------------------------------------------


class Agent:
    """A local HTTP server standing in for the ECS agent's task protection endpoint (its documented
    request and answer shapes only)."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, dict]] = []
        agent = self

        class Handler(BaseHTTPRequestHandler):
            def do_PUT(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                agent.requests.append(("PUT", self.path, body))
                answer = {"protection": {"ProtectionEnabled": body["ProtectionEnabled"], "TaskArn": "arn:t"}}
                data = json.dumps(answer).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.uri = f"http://127.0.0.1:{self.server.server_address[1]}/v1/task"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def states(self) -> list[bool]:
        return [body["ProtectionEnabled"] for _, _, body in self.requests]


@pytest.fixture
def agent() -> Iterator[Agent]:
    agent = Agent()
    yield agent
    agent.server.shutdown()
    agent.server.server_close()


def test_the_task_is_protected_while_a_run_is_in_progress_and_released_when_idle(aws, clock, agent):
    # Given a loop whose task has an ECS agent
    loop = loop_for(aws, clock, "container:a", protection=TaskProtection(agent.uri, expires_minutes=30))
    msg = queue_run(aws, clock, "job-long", "container_test.long")
    # When a run starts, then ends
    loop.start()
    assert STARTED.wait(10)
    protected = list(agent.requests)
    GO.set()
    wait_for(lambda: run_of(aws, msg.run_id).state is RunState.SUCCEEDED)
    wait_for(lambda: agent.states() == [True, False])
    loop.stop()
    # Then the task was protected (30 minutes, the documented path and body) while busy, cleared after
    assert protected == [
        ("PUT", "/v1/task/task-protection/v1/state", {"ProtectionEnabled": True, "ExpiresInMinutes": 30})
    ]
    assert agent.requests[-1] == ("PUT", "/v1/task/task-protection/v1/state", {"ProtectionEnabled": False})


def test_without_an_agent_protection_is_a_no_op_and_a_refusal_never_stops_the_worker():
    # Given no ECS_AGENT_URI (the embedded mode, Kubernetes), and an agent that is not there
    absent, unreachable = TaskProtection.from_env({}), TaskProtection("http://127.0.0.1:9")
    # Then nothing is called, and a failed call answers False instead of raising
    assert (absent.active, absent.protect(), absent.clear()) == (False, False, False)
    assert unreachable.active and unreachable.protect() is False


def test_a_queue_consumer_is_what_the_loop_reads(aws, clock):
    # Given the loop built from the settings
    loop = loop_for(aws, clock, "container:a")
    # Then it consumes the container queue (the pool's own), not a Lambda queue
    assert isinstance(loop.consumer, QueueConsumer)
    assert loop.consumer.queue_url == aws.settings.queue_urls[CONTAINER_KIND]


def test_a_runs_share_of_the_tasks_time_is_counted_as_fargate_seconds_for_its_tenant(aws, clock):
    # Given the loop at the stack's default task size (1 vCPU, 2 GB) and acme's run that holds it 0.3 s
    from jobsched.aws.usage_store import UsageStore

    msg = queue_run(aws, clock, "job-long", "container_test.long")
    loop = loop_for(aws, clock, "container:a")
    assert loop.fargate.task_size == (1024, 2048)
    # When the loop runs it to its end
    loop.start()
    assert STARTED.wait(10)
    threading.Timer(0.3, GO.set).start()
    wait_for(lambda: run_of(aws, msg.run_id).state is RunState.SUCCEEDED)
    loop.stop()
    # Then acme's day holds the task's seconds while it held the run, and the idle seconds before it
    # (shared by the delivery's weights: acme's alone), as vCPU-seconds and twice that in GB-seconds
    store = UsageStore(dynamo_for(aws.settings, aws.clients.dynamodb), aws.settings.leases_table)
    day = clock.now().date()
    [usage] = wait_for(lambda: store.tenant_days("acme", day, day))
    assert usage.fargate_vcpu_seconds >= 0.3
    assert usage.fargate_gb_seconds == pytest.approx(2 * usage.fargate_vcpu_seconds)
