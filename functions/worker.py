"""Lambda entry point of the worker: SQS batches of run messages, partial batch failures.

Each record goes to :meth:`jobsched.work.Worker.process`. A record the worker defers (its run is held
by another worker's live lease, or too little time is left) is reported in ``batchItemFailures`` so
SQS keeps it; every other record, including a duplicate of a finished run, is acknowledged. One bad
record never fails the batch. A malformed body raises, is reported as failed, and after
``maxReceiveCount`` receives SQS redrives it to the DLQ, where the DLQ consumer records it.

With ``JOBSCHED_STATE_MACHINE_ARN`` set, the worker also drives chunked jobs: it starts a chunked
run's Step Functions execution and answers the workflow's ``chunk.*`` messages on the ``long`` queue
(:mod:`jobsched.long_jobs.runner`). Chunked job modules are listed in ``JOBSCHED_HANDLER_MODULES``.
"""

from __future__ import annotations

import importlib
import os
from functools import cache
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

import jobsched.demo_handlers  # noqa: F401  (registers demo.*)
from jobsched import observability as obs
from jobsched.aws.clients import Clients
from jobsched.core.clock import Clock, SystemClock
from jobsched.settings import Settings
from jobsched.work import Worker, queue_url_for_arn, worker_from_settings

#: Comma-separated modules that define ``@job`` handlers, imported at cold start.
ENV_HANDLER_MODULES = "JOBSCHED_HANDLER_MODULES"

logger = Logger(service="jobsched-worker")
metrics = Metrics(namespace=obs.NAMESPACE, service="worker")
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


def make_worker(context: Any) -> Worker:
    """A worker whose lease owner is this invocation (its request id)."""
    settings, clients = environment()
    owner = f"worker:{getattr(context, 'aws_request_id', 'local')}"
    return worker_from_settings(settings, clients, clock, owner, metrics=obs.PowertoolsSink(metrics))


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    worker = make_worker(context)
    settings, _ = environment()

    def record_handler(record: SQSRecord) -> str:
        logger.append_keys(**obs.log_keys_of(record.body))
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

    return process_partial_response(
        event=event,
        record_handler=record_handler,
        processor=BatchProcessor(event_type=EventType.SQS),  # per call: the local mode invokes concurrently
        context=context,
    )
