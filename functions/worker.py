"""Lambda entry point of the worker: SQS batches of run messages, partial batch failures.

Each record goes to :meth:`jobsched.services.worker.Worker.process`.
A record the worker defers (its run is held
by another worker's live lease, or too little time is left) is reported in ``batchItemFailures`` so
SQS keeps it; every other record, including a duplicate of a finished run, is acknowledged. One bad
record never fails the batch. A malformed body raises, is reported as failed, and after
``maxReceiveCount`` receives SQS redrives it to the DLQ, where the DLQ consumer records it.

The records of a batch are handled concurrently, up to ``JOBSCHED_WORKER_CONCURRENCY`` threads
(default 10 = the batch size): each record is a different run with its own lease and fenced writes,
so they do not interfere, and the tenth run of a batch no longer waits for the nine before it (lag),
nor does the invocation bill their durations one after the other (cost). The response is built here
in Lambda's documented partial-batch shape (``{"batchItemFailures": [{"itemIdentifier": id}]}``);
log keys are per thread (``thread_safe_append_keys``) and metrics go through a lock.

With ``JOBSCHED_STATE_MACHINE_ARN`` set, the worker also drives chunked jobs: it starts a chunked
run's Step Functions execution and answers the workflow's ``chunk.*`` messages on the ``long`` queue
(:mod:`jobsched.long_jobs.chunk_runner`). Chunked job modules are listed in ``JOBSCHED_HANDLER_MODULES``.
"""

from __future__ import annotations

import importlib
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

import jobsched.targets.demo  # noqa: F401  (registers demo.*)
from jobsched.aws.clients import Clients
from jobsched.core.clock import Clock
from jobsched.runtime import observability as obs
from jobsched.runtime.clock import SystemClock
from jobsched.runtime.resources import ENV_HANDLER_MODULES, ENV_WORKER_CONCURRENCY
from jobsched.runtime.settings import Settings
from jobsched.services.worker import Worker, queue_url_for_arn, worker_from_settings

#: Records of one batch handled at once (threads); 1 handles them one after the other.
DEFAULT_WORKER_CONCURRENCY = 10

logger = Logger(service="jobsched-worker")
metrics = obs.make_metrics("worker")
copy_config_to_registered_loggers(source_logger=logger, include={"jobsched"})
clock: Clock = SystemClock()


class DeferredDelivery(Exception):
    """Raised for a record the worker leaves in the queue; Powertools reports it as a batch item failure."""


@cache
def environment() -> tuple[Settings, Clients]:
    """Settings and clients, built once per container on the first event (never at import)."""
    for module in filter(None, (m.strip() for m in os.environ.get(ENV_HANDLER_MODULES, "").split(","))):
        importlib.import_module(module)
    return Settings.from_env(), Clients()


class LockedSink:
    """A metric sink safe to share between the record threads (Powertools ``Metrics`` is not)."""

    def __init__(self, sink: obs.MetricSink):
        self._sink = sink
        self._lock = threading.Lock()

    def add(self, name: str, value: float = 1) -> None:
        with self._lock:
            self._sink.add(name, value)


def concurrency() -> int:
    """``JOBSCHED_WORKER_CONCURRENCY`` (at least 1); the default when unset or not a number."""
    try:
        return max(1, int(os.environ.get(ENV_WORKER_CONCURRENCY, DEFAULT_WORKER_CONCURRENCY)))
    except ValueError:
        return DEFAULT_WORKER_CONCURRENCY


def make_worker(context: Any) -> Worker:
    """A worker whose lease owner is this invocation (its request id)."""
    settings, clients = environment()
    owner = f"worker:{getattr(context, 'aws_request_id', 'local')}"
    sink = LockedSink(obs.PowertoolsSink(metrics))
    return worker_from_settings(settings, clients, clock, owner, metrics=sink)


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    worker = make_worker(context)
    settings, _ = environment()

    def record_handler(record: SQSRecord) -> str:
        logger.thread_safe_append_keys(**obs.log_keys_of(record.body))
        remaining = context.get_remaining_time_in_millis() / 1000 if context else 900.0
        outcome = worker.process(
            record.body,
            clock.now(),
            receipt_handle=record.receipt_handle,
            queue_url=queue_url_for_arn(settings.queue_urls, record.event_source_arn or ""),
            remaining_seconds=remaining,
        )
        logger.info("run delivery handled", extra={"outcome": outcome.status, **outcome.detail})
        if outcome.defer:
            raise DeferredDelivery(outcome.status)
        return outcome.status

    def failed(raw: dict[str, Any]) -> str | None:
        """The record's message id if it is to stay in the queue, else None (acknowledged)."""
        record = SQSRecord(raw)
        try:
            record_handler(record)
            return None
        except DeferredDelivery:
            return record.message_id
        except Exception:  # one bad record never fails the batch: it is retried, then redriven
            logger.exception("run delivery failed", extra={"message_id": record.message_id})
            return record.message_id
        finally:
            logger.thread_safe_clear_keys()

    records = list(event.get("Records") or [])
    threads = min(concurrency(), len(records))
    if threads <= 1:
        results = [failed(r) for r in records]
    else:
        with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="record") as pool:
            results = list(pool.map(failed, records))
    return {"batchItemFailures": [{"itemIdentifier": i} for i in results if i is not None]}
