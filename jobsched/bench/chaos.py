"""The fault-injection battery: the run pipeline under faults, judged by an independent ledger.

Each scenario runs the real dispatcher, worker, sweeper and DLQ consumer handlers in-process against
moto on a fake clock (the benchmark's harness, :mod:`jobsched.bench.harness`), as the deployment's
schedules and event source mappings would invoke them: every simulated minute a tick per shard, the
queues drained into the worker (and the dead-letter queues into the DLQ consumer), the sweeper every
5 minutes. ``jobs`` per-minute cron jobs of two tenants make the runs. A fault is in force during a
window of simulated minutes; then the pipeline runs on until every occurrence of the measured
minutes has ended, or a cap.

The evidence is not the system's own counters:

* the handler (``chaos.effect``) records every execution (run id, attempt) and applies its external
  effect through the documented idempotent-effect API (``ctx.idempotent``), which records the
  effect in this process's ledger; a run's effect applied twice is a **duplicated effect**;
* at the end, each occurrence due in the measured minutes is read back: no record, or a record still
  ``queued``/``running``/``retrying``, is **lost** / **left non-terminal**; ``succeeded`` without an
  effect in the ledger is lost too. Occurrences ended ``skipped`` by a misfire policy are counted
  apart (``skipped``): that is the policy's documented outcome, not a loss;
* **time to recover**: simulated minutes from the end of the fault window until every occurrence due
  by then had ended.

Faults at the AWS call boundary come from :mod:`jobsched.bench.faults`; the process faults
(a crashed invocation, an unacknowledged batch, duplicate deliveries, lost and double ticks, a second
dispatcher on a skewed clock, an outage) are the harness's; container workers stopped and killed
mid-run are :mod:`jobsched.bench.container_chaos`'s.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any
from unittest import mock

from jobsched.aws.clients import Clients
from jobsched.aws.leases import LeaseHeldError
from jobsched.aws.metering import Meter
from jobsched.bench.bindings import bind_functions, function_module
from jobsched.bench.container_chaos import SIGKILL, SIGTERM, ContainerPool, killed_threads_quiet
from jobsched.bench.environment import REGION, bench_environment
from jobsched.bench.evidence import ApiCalls
from jobsched.bench.faults import FaultPlan, FaultyClients, Killed, Kind, Rule
from jobsched.bench.harness import Harness, run_states
from jobsched.compose.pipeline import dispatcher_from_settings, job_service_from_settings
from jobsched.core.clock import Clock, FakeClock
from jobsched.core.errors import LeaseLostError
from jobsched.core.models import make_run_id
from jobsched.local.pollers import MAX_BATCH, failed_ids, to_lambda_record
from jobsched.runtime import resources
from jobsched.runtime.settings import Settings
from jobsched.targets.context import JobContext
from jobsched.targets.registry import is_registered, job

START = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
HANDLER = "chaos.effect"
TENANTS = ("acme", "globex")
ACTIVE = {"queued", "running", "retrying"}


class Ledger:
    """Executions and applied effects, recorded by the handler (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.executions: Counter[str] = Counter()
        self.effects: Counter[str] = Counter()
        self.kill_in_handler: Callable[[str, int], bool] = lambda run_id, attempt: False
        self._hold = threading.Event()  # set: a handler keeps working after its effect until stopped
        self._holding = 0

    def clear(self) -> None:
        with self._lock:
            self.executions.clear()
            self.effects.clear()
        self.kill_in_handler = lambda run_id, attempt: False

    def execute(self, run_id: str) -> None:
        with self._lock:
            self.executions[run_id] += 1

    def hold(self, on: bool) -> None:
        """Make the handlers keep working after their effect (a long run) until told to stop, or not."""
        if on:
            self._hold.set()
        else:
            self._hold.clear()

    def holding(self) -> int:
        """Handlers working on after their effect right now."""
        with self._lock:
            return self._holding

    def keep_working(self, ctx: JobContext) -> None:
        """While :meth:`hold` is on: work on (wall clock, at most 30 s) until the run is told to stop
        (``ctx.cancelled``: a hand-back, a cancel) or the hold ends."""
        if not self._hold.is_set():
            return
        with self._lock:
            self._holding += 1
        try:
            deadline = time.monotonic() + 30
            while self._hold.is_set() and not ctx.cancelled and time.monotonic() < deadline:
                time.sleep(0.01)
        finally:
            with self._lock:
                self._holding -= 1

    def apply(self, run_id: str) -> dict[str, str]:
        with self._lock:
            self.effects[run_id] += 1
        return {"applied": run_id}


LEDGER = Ledger()


def register_handler() -> None:
    if is_registered(HANDLER):
        return

    @job(HANDLER)
    def chaos_effect(payload: dict, ctx: JobContext) -> Any:
        """Record the execution, apply the run's one external effect idempotently, return a result;
        killed between the two when the scenario says so (a Lambda timeout or crash mid-run)."""
        LEDGER.execute(ctx.run_id)
        if LEDGER.kill_in_handler(ctx.run_id, ctx.attempt):
            raise Killed(f"killed mid-run {ctx.run_id}@{ctx.attempt}")
        applied = ctx.idempotent("charge", LEDGER.apply, ctx.run_id)
        LEDGER.keep_working(ctx)  # a long run, when the scenario holds it (a container task stopped)
        if payload.get("big"):
            return {"applied": applied, "blob": "x" * 6000}  # over 4 KiB: the output goes to S3
        return applied


class OffsetClock:
    """``base`` moved by ``offset`` (a dispatcher whose clock is skewed)."""

    def __init__(self, base: Clock, offset: timedelta):
        self.base = base
        self.offset = offset

    def now(self) -> datetime:
        return self.base.now() + self.offset


@dataclass
class Scenario:
    name: str
    what: str
    rules: list[Rule] = field(default_factory=list)
    deliveries: int = 1  # each batch delivered this many times while the fault is in force
    drop_acks: bool = False  # the worker's batch is handled but never acknowledged
    skip_ticks: bool = False  # no dispatcher tick (a lost tick)
    double_ticks: bool = False  # every tick fires twice
    skewed_dispatcher: float | None = None  # a second dispatcher, this many seconds ahead
    outage: bool = False  # nothing runs (no tick, no worker, no sweep)
    kill_in_handler: bool = False  # the handler is killed mid-run (first attempt of every other run)
    poison: int = 0  # malformed messages put on the default queue at the fault's start
    big_outputs: bool = False  # outputs over 4 KiB (stored in S3)
    misfire_policy: str | None = None  # the jobs' misfire policy (default: the job default)
    fault_minutes: tuple[int, int] = (2, 5)  # [first, last) minute with the fault in force
    #: Container workers consume the runs (jobsched.bench.container_chaos): SIGTERM at the fault's
    #: first minute, SIGKILL at its second.
    container: bool = False


@dataclass
class ScenarioResult:
    name: str
    what: str
    runs: int
    succeeded: int
    skipped: int
    lost: int
    duplicated_effects: int
    non_terminal: int
    executions: int
    recovery_minutes: int | None
    injected: dict[str, int]
    poison_handled: int
    elapsed_seconds: float
    details: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.lost == 0 and self.duplicated_effects == 0 and self.non_terminal == 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "scenario": self.name,
            "what": self.what,
            "runs": self.runs,
            "succeeded": self.succeeded,
            "skipped": self.skipped,
            "lost": self.lost,
            "duplicated_effects": self.duplicated_effects,
            "non_terminal": self.non_terminal,
            "executions": self.executions,
            "recovery_minutes": self.recovery_minutes,
            "injected": self.injected,
            "poison_handled": self.poison_handled,
            "ok": self.ok,
            "elapsed_seconds": self.elapsed_seconds,
            **({"details": self.details} if self.details else {}),
        }


def _claim(params: dict[str, Any]) -> bool:
    return ":running" in params.get("ExpressionAttributeValues", {}) and "lease_owner" in params.get(
        "UpdateExpression", ""
    )


def _success(params: dict[str, Any]) -> bool:
    values = params.get("ExpressionAttributeValues", {})
    return any(v == {"S": "succeeded"} for v in values.values())


def _ops(*names: str) -> frozenset[str]:
    return frozenset(names)


def scenarios() -> list[Scenario]:
    """The battery, in the order of the table in docs/reliability.md."""
    dynamo_writes = ("dynamodb",)
    out = [
        Scenario("baseline", "no fault"),
        Scenario("duplicate_delivery_x3", "every batch delivered 3 times", deliveries=3),
        Scenario(
            "crash_after_work_before_ack",
            "the worker finishes each batch, the invocation dies before the acknowledgement",
            drop_acks=True,
        ),
        Scenario(
            "crash_after_claim_before_work",
            "the worker dies right after its claim write (every other claim)",
            rules=[Rule(Kind.KILL_AFTER, "dynamodb", _ops("UpdateItem"), "worker", 0.5, _claim)],
        ),
        Scenario(
            "killed_mid_run",
            "the handler's invocation dies mid-run (a crash or Lambda timeout; every other run's first "
            "attempt)",
            kill_in_handler=True,
        ),
        Scenario(
            "crash_after_effect_before_result",
            "the worker dies just before writing a run's success (the effect is done)",
            rules=[Rule(Kind.KILL_BEFORE, "dynamodb", _ops("UpdateItem"), "worker", 0.5, _success)],
        ),
    ]
    for function in ("dispatcher", "worker", "sweeper"):
        out.append(
            Scenario(
                f"throttle_{function}_writes",
                f"DynamoDB throttles 30% of the {function}'s writes (retries exhausted)",
                rules=[Rule(Kind.THROTTLE, *dynamo_writes, None, function, 0.3)],
            )
        )
    for function in ("dispatcher", "worker"):
        out.append(
            Scenario(
                f"reset_after_write_{function}",
                f"30% of the {function}'s DynamoDB writes reach the table, then the connection resets "
                "and botocore's retry sends them again",
                rules=[Rule(Kind.RESET_AFTER_WRITE, "dynamodb", None, function, 0.3)],
            )
        )
        out.append(
            Scenario(
                f"lost_response_{function}",
                f"30% of the {function}'s DynamoDB writes are applied, then the response is lost "
                "(read timeout)",
                rules=[Rule(Kind.LOST_RESPONSE, "dynamodb", None, function, 0.3)],
            )
        )
    out += [
        Scenario(
            "dynamodb_5xx_everywhere",
            "20% of every DynamoDB write of every function answers 500",
            rules=[Rule(Kind.SERVER_ERROR, "dynamodb", None, None, 0.2)],
        ),
        Scenario(
            "sqs_partial_batch_send",
            "SendMessageBatch sends only the first half of its entries and reports the rest failed",
            rules=[Rule(Kind.PARTIAL_BATCH, "sqs", _ops("SendMessageBatch"), None, 1.0)],
        ),
        Scenario(
            "sqs_send_errors",
            "50% of SQS sends answer 500 (dispatcher and worker)",
            rules=[Rule(Kind.SERVER_ERROR, "sqs", _ops("SendMessage", "SendMessageBatch"), None, 0.5)],
        ),
        Scenario(
            "sqs_send_lost_response",
            "30% of SQS sends are delivered but their response is lost",
            rules=[Rule(Kind.LOST_RESPONSE, "sqs", _ops("SendMessage", "SendMessageBatch"), None, 0.3)],
        ),
        Scenario("poison_message", "3 malformed messages on the default queue", poison=3),
        Scenario(
            "s3_unavailable",
            "S3 answers 500 to every PutObject while outputs over 4 KiB are written",
            rules=[Rule(Kind.SERVER_ERROR, "s3", _ops("PutObject"), None, 1.0)],
            big_outputs=True,
        ),
        Scenario("lost_ticks", "no dispatcher tick for 3 minutes", skip_ticks=True),
        Scenario("double_ticks", "every tick fires twice", double_ticks=True),
        Scenario(
            "two_dispatchers_skewed_30s",
            "a second dispatcher, its clock 30 s ahead, ticks every shard too",
            skewed_dispatcher=30.0,
        ),
    ]
    out.append(
        Scenario(
            "container_task_killed",
            "container workers consume the runs; one is stopped with SIGTERM mid-run (stop timeout 0: "
            "its runs handed back), the next minute's is killed with SIGKILL mid-run",
            container=True,
            fault_minutes=(2, 4),
        )
    )
    for policy in ("run_all", "run_once", "skip"):
        out.append(
            Scenario(
                f"outage_1h_{policy}",
                f"nothing runs for 60 minutes, then recovery; misfire_policy {policy}",
                outage=True,
                misfire_policy=policy,
                fault_minutes=(2, 62),
            )
        )
    return out


@dataclass(frozen=True)
class BatteryConfig:
    jobs: int = 10  # per-minute jobs, split over two tenants
    minutes: int = 8  # measured minutes (occurrences due in them are judged)
    shards: int = 2
    recovery_cap_minutes: int = 40  # after the fault window and the measured minutes
    only: tuple[str, ...] = ()
    #: The battery dispatches with a 300 s enqueue horizon, not the deployment's 900 s: a per-minute
    #: job is then advanced every 5 minutes, so the fault window (minutes 2-4) holds the dispatcher's
    #: puts, sends and advances; with 900 s every judged run would be queued before the fault begins.
    enqueue_horizon_seconds: int = 300


class ChaosHarness(Harness):
    """The benchmark harness with the scenario's process faults."""

    def __init__(self, *args: Any, plan: FaultPlan, clock: FakeClock, dlq: Any, **kw: Any):
        super().__init__(*args, **kw)
        self.plan = plan
        self.clock = clock
        self.dlq = dlq
        self.deliveries = 1
        self.drop_acks = False
        self.crashed = 0
        self.errors: Counter[str] = Counter()  # invocations that raised, per function
        self.poison_handled = 0
        #: Queues the Lambda worker leaves alone (consumed by the scenario's container workers).
        self.skip_queues: set[str] = set()
        self.handed_back = 0  # runs the container workers handed back

    def invoke(self, name: str, event: dict[str, Any]) -> Any:
        """One invocation; a crash (:class:`Killed`) or an error it raised ends it as Lambda would end
        it: no response (a worker batch is not acknowledged; a tick's schedule fires again next minute)."""
        try:
            return super().invoke(name, event)
        except Killed:
            self.crashed += 1
            return KILLED
        except Exception:
            self.errors[name] += 1
            return KILLED

    def drain(self) -> None:
        for ref in self.provisioned.queues.values():
            for _ in range(0 if ref.url in self.skip_queues else 200):  # bounded: a redelivery could loop
                messages = self._receive(ref.url)
                if not messages:
                    break
                records = [to_lambda_record(m, queue_arn=ref.arn, region=REGION) for m in messages]
                response: Any = None
                for _copy in range(self.deliveries):
                    response = self.invoke("worker", {"Records": records})
                self.batches += 1
                if response is KILLED or self.drop_acks:
                    continue  # the invocation died: SQS keeps the batch until its visibility times out
                ids = {r["messageId"] for r in records}
                reported = failed_ids(response, ids)
                failed = ids if reported is None else reported
                self._delete(ref.url, [r for r in records if r["messageId"] not in failed])
            self._drain_dlq(ref)

    def _drain_dlq(self, ref: Any) -> None:
        while True:
            messages = self.sqs.receive_message(
                QueueUrl=ref.dlq_url, MaxNumberOfMessages=MAX_BATCH, WaitTimeSeconds=0, AttributeNames=["All"]
            ).get("Messages", [])
            if not messages:
                return
            records = [to_lambda_record(m, queue_arn=ref.dlq_arn, region=REGION) for m in messages]
            self.calls.current = "dlq_consumer"
            try:
                response = self.dlq.handler({"Records": records}, _Context())
            finally:
                self.calls.current = None
            ids = {r["messageId"] for r in records}
            failed = failed_ids(response, ids) or set()
            done = [r for r in records if r["messageId"] not in failed]
            self.poison_handled += len(done)
            if done:
                self.sqs.delete_message_batch(
                    QueueUrl=ref.dlq_url,
                    Entries=[{"Id": str(i), "ReceiptHandle": r["receiptHandle"]} for i, r in enumerate(done)],
                )
            if failed:
                return


KILLED = object()


class _Context:
    function_name = "dlq_consumer"
    memory_limit_in_mb = 256
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:dlq_consumer"
    aws_request_id = "chaos"

    def get_remaining_time_in_millis(self) -> int:
        return 60_000


@contextmanager
def idempotency_on_clock(clock: Clock) -> Iterator[None]:
    """While active, Powertools idempotency reads "now" from ``clock``, as moto's SQS does in the
    benchmark environment (:func:`jobsched.bench.environment.sqs_on_clock`): an effect's "in progress"
    deadline and its expiry then pass in simulated time, like the runs' retries and leases."""
    import datetime as real
    import types

    from aws_lambda_powertools.utilities.idempotency import base
    from aws_lambda_powertools.utilities.idempotency.persistence import base as persistence_base
    from aws_lambda_powertools.utilities.idempotency.persistence import datarecord, dynamodb

    class SimulatedDatetime(real.datetime):
        @classmethod
        def now(cls, tz: real.tzinfo | None = None) -> SimulatedDatetime:
            return cls.fromtimestamp(clock.now().timestamp(), tz)  # naive local time when tz is None

    shim = types.SimpleNamespace(
        datetime=SimulatedDatetime, timedelta=real.timedelta, timezone=real.timezone, date=real.date
    )
    with ExitStack() as stack:
        for module in (base, persistence_base, datarecord, dynamodb):
            if hasattr(module, "dt"):
                stack.enter_context(mock.patch.object(module, "dt", shim))
        yield


def _create_jobs(config: BatteryConfig, scenario: Scenario, settings: Settings, now: datetime) -> list[str]:
    service = job_service_from_settings(settings, Clients(), meter=Meter())
    ids = iter(f"chaos-{i:04d}" for i in range(config.jobs))
    service.id_factory = lambda: next(ids)
    spec: dict[str, Any] = {
        "name": "chaos",
        "schedule": "* * * * *",
        "target": {"handler": HANDLER},
        "payload": {"big": True} if scenario.big_outputs else {},
        "retry": {"max_attempts": 5, "base_seconds": 5, "max_seconds": 60},
    }
    if scenario.misfire_policy:
        spec["misfire_policy"] = scenario.misfire_policy
    if scenario.container:
        spec["pool"] = "container"
    return [service.create(TENANTS[i % 2], spec, now).id for i in range(config.jobs)]


def run_scenario(scenario: Scenario, config: BatteryConfig | None = None) -> ScenarioResult:
    """Run one scenario and judge it from the ledger and the run records."""
    config = config or BatteryConfig()
    register_handler()
    LEDGER.clear()
    started = time.perf_counter()
    clock = FakeClock(START - timedelta(seconds=30))
    plan = FaultPlan(rules=list(scenario.rules))
    first, last = scenario.fault_minutes
    calls = ApiCalls()
    plan.current_function = lambda: calls.current
    with ExitStack() as stack:
        clients, provisioned = stack.enter_context(bench_environment(config.shards, clock))
        settings = replace(Settings.from_env(), enqueue_horizon_seconds=config.enqueue_horizon_seconds)
        stack.enter_context(calls.active())
        stack.enter_context(idempotency_on_clock(clock))
        # Every function's clients carry the plan's faults; each function builds its own, as on AWS.
        functions = stack.enter_context(
            bind_functions(clock, settings=settings, clients=lambda: FaultyClients(plan))
        )
        dlq = function_module("dlq_consumer")
        stack.enter_context(dlq.seam.installed(clock=clock, settings=settings, clients=FaultyClients(plan)))
        harness = ChaosHarness(functions, clients, provisioned, calls, plan=plan, clock=clock, dlq=dlq)
        pool = None
        if scenario.container:
            pool = ContainerPool(settings, lambda: FaultyClients(plan), clock, clients["sqs"])
            harness.skip_queues = {pool.queue_url}
            stack.enter_context(killed_threads_quiet())
        job_ids = _create_jobs(config, scenario, settings, clock.now())
        skewed = None
        if scenario.skewed_dispatcher is not None:
            skewed_clock = OffsetClock(clock, timedelta(seconds=scenario.skewed_dispatcher))
            skewed = dispatcher_from_settings(
                settings, FaultyClients(plan), owner="dispatcher-skewed", clock=skewed_clock
            )
        measured = [
            make_run_id(j, START + timedelta(minutes=m)) for j in job_ids for m in range(config.minutes)
        ]
        runs_table = provisioned.tables[resources.ENV_RUNS_TABLE]
        end_of_fault = max(last, config.minutes)
        recovery: int | None = None
        states: dict[str, str] = {}
        minute = 0
        while minute < end_of_fault + config.recovery_cap_minutes:
            in_fault = first <= minute < last
            clock.set(START + timedelta(minutes=minute))
            plan.active = in_fault
            harness.deliveries = scenario.deliveries if in_fault else 1
            harness.drop_acks = scenario.drop_acks and in_fault
            LEDGER.kill_in_handler = (
                _every_other_first_attempt
                if scenario.kill_in_handler and in_fault
                else (lambda run_id, attempt: False)
            )
            if in_fault and scenario.poison and minute == first:
                _put_poison(clients["sqs"], provisioned.queues["default"].url, scenario.poison)
            if not (in_fault and scenario.outage):
                if not (in_fault and scenario.skip_ticks):
                    for _ in range(2 if in_fault and scenario.double_ticks else 1):
                        harness.tick(config.shards)
                    if skewed is not None and in_fault:
                        for shard in range(config.shards):
                            _skewed_tick(
                                skewed, shard, clock, scenario.skewed_dispatcher or 0.0, config.shards
                            )
                if pool is not None:
                    fault = {first: SIGTERM, first + 1: SIGKILL}.get(minute) if in_fault else None
                    kept = LEDGER.kill_in_handler
                    if fault == SIGKILL:  # every first attempt the task runs dies with it, mid-run
                        LEDGER.kill_in_handler = pool.kill_first_attempts
                    pool.drain(fault, LEDGER)
                    harness.handed_back, harness.crashed = pool.handed_back, pool.killed
                    LEDGER.kill_in_handler = kept
                harness.drain()
                if minute % 5 == 4:
                    harness.sweep()
            plan.active = False
            if minute >= end_of_fault:
                states = run_states(clients["dynamodb"], runs_table)
                due = [r for r in measured if _due(r) <= clock.now()]
                if all(states.get(r) not in ACTIVE and r in states for r in due) and len(due) == len(
                    measured
                ):
                    recovery = minute - end_of_fault
                    break
            minute += 1
        states = run_states(clients["dynamodb"], runs_table)
    return _judge(scenario, measured, states, plan, harness, recovery, time.perf_counter() - started)


def _every_other_first_attempt(run_id: str, attempt: int) -> bool:
    return attempt == 1 and sum(map(ord, run_id)) % 2 == 0


def _due(run_id: str) -> datetime:
    stamp = run_id.split(".")[1]
    return datetime.strptime(stamp, "%Y%m%dT%H%M%S").replace(tzinfo=UTC)


def _skewed_tick(dispatcher: Any, shard: int, clock: FakeClock, offset: float, shards: int) -> None:
    try:
        dispatcher.dispatch_shard(shard, clock.now() + timedelta(seconds=offset), shards)
    except (LeaseHeldError, LeaseLostError):
        pass  # the other dispatcher holds the shard: as the function does


def _put_poison(sqs: Any, url: str, count: int) -> None:
    for i in range(count):
        sqs.send_message(QueueUrl=url, MessageBody=f"not a run message {i} {{")


def _judge(
    scenario: Scenario,
    measured: list[str],
    states: dict[str, str],
    plan: FaultPlan,
    harness: ChaosHarness,
    recovery: int | None,
    elapsed: float,
) -> ScenarioResult:
    details: dict[str, str] = {}
    lost = non_terminal = skipped = succeeded = 0
    for run_id in measured:
        state = states.get(run_id)
        if state is None:
            lost += 1
            details[run_id] = "missing"
        elif state in ACTIVE:
            non_terminal += 1
            details[run_id] = state
        elif state == "skipped":
            skipped += 1
        elif state == "succeeded":
            if LEDGER.effects.get(run_id, 0) == 0:
                lost += 1
                details[run_id] = "succeeded without its effect"
            else:
                succeeded += 1
        else:
            lost += 1  # failed (a dead letter) or cancelled: the run did not do its work
            details[run_id] = state
    duplicated = sum(n - 1 for n in LEDGER.effects.values() if n > 1)
    return ScenarioResult(
        name=scenario.name,
        what=scenario.what,
        runs=len(measured),
        succeeded=succeeded,
        skipped=skipped,
        lost=lost,
        duplicated_effects=duplicated,
        non_terminal=non_terminal,
        executions=sum(LEDGER.executions.values()),
        recovery_minutes=recovery,
        injected=dict(plan.injected)
        | ({"crashed_invocations": harness.crashed} if harness.crashed else {})
        | {f"{name}_errors": n for name, n in harness.errors.items()}
        | ({"handed_back": harness.handed_back} if harness.handed_back else {}),
        poison_handled=harness.poison_handled,
        elapsed_seconds=round(elapsed, 2),
        details=dict(list(details.items())[:5]),
    )


def run_battery(
    config: BatteryConfig | None = None, progress: Callable[[ScenarioResult], None] | None = None
) -> list[ScenarioResult]:
    config = config or BatteryConfig()
    chosen = [s for s in scenarios() if not config.only or s.name in config.only]
    results = []
    for scenario in chosen:
        results.append(run_scenario(scenario, config))
        if progress is not None:
            progress(results[-1])
    return results


def table(results: list[ScenarioResult]) -> str:
    """The battery as a Markdown table (docs/reliability.md)."""
    head = (
        "| scenario | runs | succeeded | skipped | lost | duplicated effects | non-terminal "
        "| recovery (min) | injected |"
    )
    rows = [head, "|" + "---|" * 9]
    for r in results:
        recovered = r.recovery_minutes if r.recovery_minutes is not None else "not recovered"
        injected_ = ", ".join(f"{k} {v}" for k, v in sorted(r.injected.items())) or "-"
        rows.append(
            f"| `{r.name}` | {r.runs} | {r.succeeded} | {r.skipped} | {r.lost} | {r.duplicated_effects} | "
            f"{r.non_terminal} | {recovered} | {injected_} |"
        )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m jobsched.bench.chaos", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--jobs", type=int, default=BatteryConfig.jobs)
    parser.add_argument("--minutes", type=int, default=BatteryConfig.minutes)
    parser.add_argument("--only", nargs="*", default=[], help="scenario names (default: all)")
    parser.add_argument("--json", action="store_true", help="print one JSON object on the last line")
    args = parser.parse_args(argv)
    config = BatteryConfig(jobs=args.jobs, minutes=args.minutes, only=tuple(args.only))
    # The functions log (JSON lines, their errors included: injected faults make many); the report
    # alone goes to stdout. Their loggers are created when the functions are first imported, below.
    with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):
        results = run_battery(
            config,
            lambda r: print(
                f"{r.name}: {'ok' if r.ok else 'FAILED'} ({r.elapsed_seconds} s)", file=sys.stderr, flush=True
            ),
        )
    print(table(results))
    failed = [r.name for r in results if not r.ok]
    print(
        f"\n{len(results) - len(failed)} of {len(results)} scenarios met the goal (0 lost, 0 duplicated "
        f"effects, 0 non-terminal)" + (f"; failed: {', '.join(failed)}" if failed else "")
    )
    if args.json:
        print(
            json.dumps(
                {
                    "config": config.__dict__ | {"only": list(config.only)},
                    "scenarios": [r.to_dict() for r in results],
                }
            )
        )
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
