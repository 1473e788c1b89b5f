"""Lambda entry point of the DLQ consumer: poison run messages -> failed runs (reason ``poison``).

Same shape as the worker: one record at a time through
:meth:`jobsched.services.dlq_consumer.DlqConsumer.process`,
partial batch failures for records left for later (a run still under a live lease). The consumer is
built once per container, on the first invocation, from what :data:`seam` holds (clock, settings,
clients, meter, metric sink: :mod:`jobsched.compose.seam`).
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from jobsched.compose.pipeline import dlq_consumer_from_settings, function_usage_from_settings
from jobsched.compose.seam import Parts, Seam
from jobsched.runtime import observability as obs
from jobsched.services.dlq_consumer import DlqConsumer
from jobsched.services.usage import FunctionUsage, TenantMeter

logger = Logger(service="jobsched-dlq-consumer")
metrics = obs.make_metrics("dlq_consumer")
obs.configure_function_logging(logger)


class LeftForLater(Exception):
    """A DLQ record whose run is still held by a live lease: kept in the DLQ for another look."""


def build(parts: Parts) -> tuple[DlqConsumer, FunctionUsage]:
    """The DLQ consumer and its usage counting, built on first use and kept for the container's
    lifetime (without an installed meter, a per-tenant one: decision 0059 amended). A poison message
    that names its run is handled in the run's tenant's lane: its requests are that tenant's; the
    invocation's duration and request are shared by the tenants of the records it handled."""
    settings, clients = parts.read_settings(), parts.make_clients()
    sink = parts.metrics_or(obs.PowertoolsSink(metrics))
    meter = parts.meter if parts.meter is not None else TenantMeter()
    consumer = dlq_consumer_from_settings(settings, clients, metrics=sink, meter=meter)
    return consumer, function_usage_from_settings(settings, clients, parts.clock, meter, "dlq_consumer")


seam = Seam("functions.dlq_consumer", build, uses=("clock", "settings", "clients", "meter", "metrics"))


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    service, usage = seam.services()
    clock = seam.clock

    def record_handler(record: SQSRecord) -> str:
        count = record.attributes.approximate_receive_count
        with obs.run_log_keys(**obs.log_keys_of(record.body)):
            outcome = service.process(record.body, clock.now(), receive_count=int(count) if count else None)
            logger.warning("poison message handled", extra={"outcome": outcome.status, **outcome.detail})
        if outcome.defer:
            raise LeftForLater(outcome.status)
        return outcome.status

    with usage.invocation():  # then one usage write per tenant the batch served (decision 0059)
        return dict(
            process_partial_response(
                event=event,
                record_handler=record_handler,
                processor=BatchProcessor(
                    event_type=EventType.SQS
                ),  # per call: the local mode invokes concurrently
                context=context,
            )
        )
