"""Lambda entry point of the worker: SQS batches of run messages, partial batch failures.

Each record goes to :meth:`jobsched.services.worker.Worker.process`.
A record the worker defers (its run is held
by another worker's live lease, or too little time is left) is reported in ``batchItemFailures`` so
SQS keeps it; every other record, including a duplicate of a finished run, is acknowledged. One bad
record never fails the batch. A malformed body raises, is reported as failed, and after
``maxReceiveCount`` receives SQS redrives it to the DLQ, where the DLQ consumer records it.

The records of a batch are handled concurrently, up to ``JOBSCHED_WORKER_CONCURRENCY`` threads
(default 10 = the batch size; :func:`jobsched.services.worker.process_batch`): each record is a
different run with its own lease and fenced writes, so they do not interfere, and the tenth run of a
batch no longer waits for the nine before it (lag), nor does the invocation bill their durations one
after the other (cost). The response is Lambda's documented partial-batch shape
(``{"batchItemFailures": [{"itemIdentifier": id}]}``); the run's log keys are per context
(:func:`jobsched.runtime.observability.run_log_keys`: every line of the record's threads, the
handler's own included, carries them) and metrics go through a lock.

With ``JOBSCHED_STATE_MACHINE_ARN`` set, the worker also drives chunked jobs: it starts a chunked
run's Step Functions execution and answers the workflow's ``chunk.*`` messages on the ``long`` queue
(:mod:`jobsched.long_jobs.chunk_runner`). Chunked job modules are listed in ``JOBSCHED_HANDLER_MODULES``.

Settings and clients are built once per container, on the first event, and the worker once per
invocation (its lease owner is the invocation's request id), from what :data:`seam` holds (clock,
settings, clients, meter, metric sink: :mod:`jobsched.compose.seam`).
"""

from __future__ import annotations

import importlib
import os
import time
from typing import Any

from aws_lambda_powertools import Logger

import jobsched.targets.demo  # noqa: F401  (registers demo.*)
from jobsched.aws.clients import Clients
from jobsched.aws.queues import queue_url_for_arn
from jobsched.aws.tenant_limits import CONTAINER_CACHE
from jobsched.compose.pipeline import Deliveries, worker_from_settings
from jobsched.compose.seam import Parts, Seam
from jobsched.runtime import observability as obs
from jobsched.runtime.resources import DEFAULT_WORKER_CONCURRENCY, ENV_WORKER_CONCURRENCY, WORKER_MEMORY_MB
from jobsched.runtime.settings import Settings, worker_concurrency_from
from jobsched.services.deliveries import Delivery
from jobsched.services.outcome import Outcome
from jobsched.services.usage import TenantMeter
from jobsched.services.worker import process_batch

__all__ = ["DEFAULT_WORKER_CONCURRENCY", "ENV_WORKER_CONCURRENCY", "concurrency", "handler", "seam"]

logger = Logger(service="jobsched-worker")
metrics = obs.make_metrics("worker")
obs.configure_function_logging(logger)


def build(parts: Parts) -> tuple[Settings, Clients]:
    """Settings and clients, built once per container on the first event (never at import); the
    handler modules the settings name are imported then."""
    settings = parts.read_settings()
    for module in settings.handler_modules:
        importlib.import_module(module)
    return settings, parts.make_clients()


seam = Seam("functions.worker", build, uses=("clock", "settings", "clients", "meter", "metrics"))


def concurrency() -> int:
    """Records of one batch handled at once: ``JOBSCHED_WORKER_CONCURRENCY`` read now, by the same rule
    as :attr:`Settings.worker_concurrency` (what the handler uses)."""
    return worker_concurrency_from(os.environ.get(ENV_WORKER_CONCURRENCY))


#: The container's per-tenant meter when none is installed: what an invocation did for no one tenant
#: (and the seconds its usage write took) is shared with the next invocation's tenants (decision 0059).
CONTAINER_METER = TenantMeter()


#: The tenants' budget statuses as read (the spend cap on runs queued ahead, decision 0062), kept for
#: the container's life like the limits; made by the first invocation that builds a worker.
_BUDGETS: list[Any] = []


def make_worker(context: Any) -> Deliveries:
    """A worker whose lease owner is this invocation (its request id)."""
    parts = seam.parts
    settings, clients = seam.services()
    owner = f"worker:{getattr(context, 'aws_request_id', 'local')}"
    sink = obs.LockedSink(parts.metrics_or(obs.PowertoolsSink(metrics)))
    # The tenants' limits as read are kept for the container's life, not one invocation's (a minute).
    return worker_from_settings(
        settings,
        clients,
        parts.clock,
        owner,
        metrics=sink,
        meter=parts.meter if parts.meter is not None else CONTAINER_METER,
        limits_cache=CONTAINER_CACHE,
        budget_cache=_budget_cache(),
    )


def _budget_cache() -> Any:
    if not _BUDGETS:
        from jobsched.services.budgets import BudgetCache

        _BUDGETS.append(BudgetCache())
    return _BUDGETS[0]


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    started = time.perf_counter()
    worker = make_worker(context)
    settings, _ = seam.services()
    clock = seam.clock

    def handle(delivery: Delivery) -> Outcome:
        with obs.run_log_keys(**obs.log_keys_of(delivery.body)):
            remaining = context.get_remaining_time_in_millis() / 1000 if context else 900.0
            outcome = worker.handle(delivery, clock.now(), remaining_seconds=remaining)
            logger.info(
                "run delivery handled",
                extra={"message_id": delivery.message_id, "outcome": outcome.status, **outcome.detail},
            )
            return outcome

    deliveries = []
    # The record's fields are read as Lambda's SQS event documents them (Powertools' SQSRecord reads
    # the same keys; importing its data classes, every event source's, cost the cold start ~5 %).
    for raw in event.get("Records") or []:
        deliveries.append(
            Delivery(
                message_id=raw["messageId"],
                body=raw["body"],
                receipt_handle=raw["receiptHandle"],
                queue_url=queue_url_for_arn(settings.queue_urls, raw.get("eventSourceARN") or ""),
                receive_count=_receive_count(raw),
            )
        )
    # The fair share (decision 0057): a tenant holding its slots of the pool leaves the head-room free.
    share = worker.enter_share(deliveries, f"worker:{getattr(context, 'aws_request_id', 'local')}")
    try:  # the records admitted at once run beside the hold of a tenant at its slots (Share.run)
        failed = share.run(
            lambda records, threads: process_batch(records, handle, concurrency=threads),
            settings.worker_concurrency,
        )
    finally:
        share.exit(clock.now())
    failed = share.deferred + failed
    meter = worker.usage.meter if worker.usage is not None else None
    if isinstance(meter, TenantMeter):  # the event source mapping's receive and delete of this batch
        meter.record_event_source(
            [len(d.body.encode()) for d in deliveries], deleted=len(failed) < len(deliveries)
        )
    memory = int(getattr(context, "memory_limit_in_mb", 0) or WORKER_MEMORY_MB)
    # one write per (tenant, day) this batch touched, with its share of the invocation (services/usage.py)
    worker.flush_usage(seconds=time.perf_counter() - started, memory_mb=memory)
    return {"batchItemFailures": [{"itemIdentifier": message_id} for message_id in failed]}


def _receive_count(record: dict[str, Any]) -> int | None:
    """The record's ``ApproximateReceiveCount`` (None if absent or not a number)."""
    raw = (record.get("attributes") or {}).get("ApproximateReceiveCount")
    try:
        return int(raw) if raw is not None else None
    except (TypeError, ValueError):
        return None
