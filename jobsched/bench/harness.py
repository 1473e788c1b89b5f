"""Invoking the run-pipeline functions the way Lambda does, and tallying what each invocation consumed.

* a dispatcher tick is the event EventBridge Scheduler sends, ``{"shard": k}``, one per shard;
* a worker invocation is an SQS event built from a real ``ReceiveMessage`` of up to 10 messages
  (:func:`jobsched.local.pollers.to_lambda_record`, the embedded mode's own conversion); afterwards
  the records not reported in ``batchItemFailures`` are deleted, as the event source mapping does.

The event source mapping's ``ReceiveMessage`` and ``DeleteMessageBatch`` are billed SQS requests on
AWS too, so they are metered here, under ``event_source_mapping``. Its empty polls are not: they are
a fixed cost per queue and hour, whatever the number of runs.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from jobsched.aws.metering import Dynamo, Meter, deserialize
from jobsched.aws.usage_store import PREFIX as USAGE_PREFIX
from jobsched.bench.bindings import PipelineFunctions
from jobsched.bench.environment import REGION
from jobsched.bench.evidence import ApiCalls, Tally
from jobsched.core.usage import DayUsage
from jobsched.local.invoke import LambdaContext, function_spec
from jobsched.local.pollers import MAX_BATCH, failed_ids, to_lambda_record
from jobsched.local.provision import Provisioned
from jobsched.runtime.resources import ENV_LEASES_TABLE, WORKER_MEMORY_MB
from jobsched.services.usage import TenantMeter

log = logging.getLogger(__name__)

ESM = "event_source_mapping"


@dataclass(frozen=True)
class UsageNow:
    """The tenants' usage at one moment: ``estimated_usd`` per tenant, summed over its usage items, and
    per function what counting has cost (:attr:`jobsched.services.usage.TenantMeter.counting`)."""

    tenants: dict[str, float]
    counting: dict[str, dict[str, float]]

    def since(self, earlier: UsageNow) -> UsageNow:
        """What was added after ``earlier``."""
        tenants = {t: usd - earlier.tenants.get(t, 0.0) for t, usd in self.tenants.items()}
        counting = {
            name: {k: v - earlier.counting.get(name, {}).get(k, 0.0) for k, v in figures.items()}
            for name, figures in self.counting.items()
        }
        return UsageNow(tenants, counting)


def lambda_context(function: str) -> LambdaContext:
    """A Lambda context with the function's configured timeout and memory."""
    spec = function_spec(function)
    return LambdaContext(spec.name, spec.timeout_seconds, spec.memory_mb)


class Harness:
    """Invokes the functions one at a time, makes the event source mapping's SQS calls, keeps the tally."""

    def __init__(
        self, functions: PipelineFunctions, clients: dict[str, Any], provisioned: Provisioned, calls: ApiCalls
    ):
        self.functions = functions
        self.calls = calls
        self.sqs = clients["sqs"]
        self.dynamodb = clients["dynamodb"]
        self.provisioned = provisioned
        self.esm_meter = Meter()
        self.tally = Tally()
        self.batches = 0
        #: The tenants' usage and what counting it cost, when the tally was last reset (decision 0059).
        self.usage_at_reset = self.usage_now()

    def reset_tally(self) -> None:
        """Start counting afresh (after the warm-up)."""
        self.tally = Tally()
        self.calls.calls.clear()
        self.calls.seconds.clear()
        self.batches = 0
        self.usage_at_reset = self.usage_now()

    def usage_now(self) -> UsageNow:
        """Every tenant's ``estimated_usd`` as its usage items say (a Scan with a meter of its own, out
        of the tally), and what each function's counting has cost so far (decision 0059)."""
        dynamo = Dynamo(self.dynamodb, {}, Meter())
        tenants: dict[str, float] = {}
        for item in dynamo.scan_all(self.provisioned.tables[ENV_LEASES_TABLE]):
            if str(item.get("lease_key", "")).startswith(USAGE_PREFIX):
                usage = DayUsage.from_item(item)
                tenants[usage.tenant] = tenants.get(usage.tenant, 0.0) + usage.estimated_usd(WORKER_MEMORY_MB)
        counting = {
            name: dict(meter.counting)
            for name, meter in self.functions.meters.items()
            if isinstance(meter, TenantMeter)
        }
        return UsageNow(tenants, counting)

    def invoke(self, name: str, event: dict[str, Any]) -> Any:
        """One Lambda invocation of ``name``, timed and metered."""
        context = lambda_context(name)
        self.calls.current = name
        try:
            with self.tally.invocation(name, self.functions.meter(name)):
                return getattr(self.functions, name)(event, context)
        finally:
            self.calls.current = None

    def tick(self, shards: int) -> None:
        """The per-shard schedules firing once."""
        for shard in range(shards):
            self.invoke("dispatcher", {"shard": shard})

    def sweep(self) -> None:
        """The sweeper's schedule firing once."""
        self.invoke("sweeper", {})

    def simulate(
        self, clock: Any, start: Any, *, warm_up: int, minutes: int, shards: int, sweep_every: int
    ) -> None:
        """Simulated minutes of the deployed pipeline: at each minute from ``start``, the clock set to
        it, one tick per shard, the queues drained, and the sweeper every ``sweep_every`` minutes; the
        tally is restarted after the ``warm_up`` minutes (not counted)."""
        from datetime import timedelta

        for minute in range(warm_up + minutes):
            if minute == warm_up:
                self.reset_tally()
            clock.set(start + timedelta(minutes=minute))
            self.tick(shards)
            self.drain()
            if minute % sweep_every == sweep_every - 1:
                self.sweep()

    def drain(self) -> None:
        """Deliver every visible message of every queue to the worker, in batches of up to 10."""
        for kind, ref in self.provisioned.queues.items():
            while messages := self._receive(ref.url):
                records = [to_lambda_record(m, queue_arn=ref.arn, region=REGION) for m in messages]
                try:
                    response = self.invoke("worker", {"Records": records})
                except Exception:
                    log.exception("worker raised on a batch of %s; left to its visibility timeout", kind)
                    response = None
                self.batches += 1
                ids = {r["messageId"] for r in records}
                reported = None if response is None else failed_ids(response, ids)
                failed = ids if reported is None else reported  # None: the whole batch failed
                self._delete(ref.url, [r for r in records if r["messageId"] not in failed])

    def _receive(self, url: str) -> list[dict[str, Any]]:
        messages = self.sqs.receive_message(
            QueueUrl=url,
            MaxNumberOfMessages=MAX_BATCH,
            WaitTimeSeconds=0,
            AttributeNames=["All"],
            MessageSystemAttributeNames=["All"],
            MessageAttributeNames=["All"],
        ).get("Messages", [])
        if messages:
            with self.tally.invocation(ESM, self.esm_meter, lambda_invocation=False):
                self.esm_meter.record_sqs("ReceiveMessage", [len(m["Body"].encode()) for m in messages])
        return messages

    def _delete(self, url: str, records: list[dict[str, Any]]) -> None:
        if not records:
            return
        self.sqs.delete_message_batch(
            QueueUrl=url,
            Entries=[{"Id": str(i), "ReceiptHandle": r["receiptHandle"]} for i, r in enumerate(records)],
        )
        with self.tally.invocation(ESM, self.esm_meter, lambda_invocation=False):
            self.esm_meter.record_sqs("DeleteMessageBatch", [])


def run_states(dynamodb: Any, table: str) -> dict[str, str]:
    """run id -> state, read straight from the table (not through a meter: reading back is no run's cost)."""
    states: dict[str, str] = {}
    for page in dynamodb.get_paginator("scan").paginate(TableName=table):
        for wire in page.get("Items", []):
            item = deserialize(wire)
            states[f"{item['job_id']}.{item['run_key']}"] = str(item.get("state"))
    return states
