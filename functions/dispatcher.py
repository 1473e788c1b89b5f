"""Dispatcher Lambda: one tick of one shard (event ``{"shard": k, "shards": n}`` from a per-shard
EventBridge schedule: shard ``k`` of ``n``; without ``shards`` the deployment's ``JOBSCHED_SHARDS``), or
of every shard when the event names none (handy locally and for a manual catch-up).

Thin on purpose: parse the event, call
:meth:`jobsched.services.dispatcher.Dispatcher.dispatch_shard`, return the
summary and emit its metrics: ``RunsSkipped``, ``RunsDispatched``, ``JobsAdvanced``, ``SendFailures``,
``StaleJobs``, ``ShardsBusy``, ``JobsHeldBack`` (due jobs held back by backpressure), ``JobsCapped``
(due jobs held because their tenant is over its monthly budget, decision 0062) and
``RunsSkipped<Reason>`` (:func:`skipped_metrics`), with no per-run or per-tenant dimension (those
would be billed as separate metrics). Services are built once per container, on the first
invocation, never at import time, from what :data:`seam` holds (the clock, the sleep a tick aligns
its sends with, settings, clients, meter: :mod:`jobsched.compose.seam`).
"""

from __future__ import annotations

import uuid
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from jobsched.aws.leases import LeaseHeldError
from jobsched.compose.pipeline import dispatcher_from_settings, function_usage_from_settings
from jobsched.compose.seam import Parts, Seam
from jobsched.core.errors import LeaseLostError, ValidationError
from jobsched.core.ids import validate_shard_count
from jobsched.runtime import observability as obs
from jobsched.runtime.observability import JOBS_CAPPED, JOBS_HELD_BACK
from jobsched.runtime.settings import Settings
from jobsched.services.dispatcher import Dispatcher, DispatchSummary
from jobsched.services.usage import FunctionUsage, TenantMeter

logger = Logger(service="jobsched-dispatcher")
metrics = obs.make_metrics("dispatcher")
obs.configure_function_logging(logger)


def build(parts: Parts) -> tuple[Settings, Dispatcher, FunctionUsage]:
    """Settings, dispatcher and usage counting, built on first use and kept for the container's
    lifetime. With the wall clock and ``time.sleep`` (nothing installed) a tick aligns its sends to the
    second by the wall clock (decision 0032). Without an installed meter, a per-tenant one (decision
    0059)."""
    settings, clients = parts.read_settings(), parts.make_clients()
    meter = parts.meter if parts.meter is not None else TenantMeter()
    owner = f"dispatcher-{uuid.uuid4().hex[:12]}"
    dispatcher = dispatcher_from_settings(
        settings,
        clients,
        meter=meter,
        owner=owner,
        clock=parts.clock,
        sleep=parts.sleep,
        warn_budgets=True,
    )
    return (
        settings,
        dispatcher,
        function_usage_from_settings(settings, clients, parts.clock, meter, "dispatcher"),
    )


seam = Seam("functions.dispatcher", build, uses=("clock", "sleep", "settings", "clients", "meter"))


def parse_shards(event: Any, shards: int) -> tuple[list[int], int]:
    """``{"shard": k, "shards": n}`` -> ([k], n); ``{"shard": k}`` -> ([k], ``shards``); no shard ->
    every shard of the count. Anything else is a ValidationError."""
    count = shards
    if isinstance(event, dict) and event.get("shards") is not None:
        count = validate_shard_count(event["shards"])
    if not isinstance(event, dict) or event.get("shard") is None:
        return list(range(count)), count
    shard = event["shard"]
    if isinstance(shard, bool) or not isinstance(shard, int) or not 0 <= shard < count:
        raise ValidationError(f"shard must be an integer in 0..{count - 1}, got {shard!r}", field="shard")
    return [shard], count


def skipped_metrics(summary: DispatchSummary) -> dict[str, int]:
    """The tick's skipped runs by reason, as ``RunsSkipped<Reason>`` metrics (only reasons that
    skipped something: an EMF line names no metric it does not need)."""
    counts: dict[str, int] = {}
    for reason, count in summary.skipped_by_reason.items():
        if count:
            name = obs.skipped_metric(reason)
            counts[name] = counts.get(name, 0) + count
    return counts


@metrics.log_metrics
@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    settings, dispatcher, usage = seam.services()
    with usage.invocation():  # then one usage write per tenant the tick served (decision 0059)
        return tick(event, settings, dispatcher)


def tick(event: dict[str, Any], settings: Settings, dispatcher: Dispatcher) -> dict[str, Any]:
    shards, count = parse_shards(event, settings.shards)
    summary = DispatchSummary()
    for shard in shards:
        now = seam.clock.now()
        try:
            summary.merge(dispatcher.dispatch_shard(shard, now, count))
        except (LeaseHeldError, LeaseLostError) as exc:
            # Another tick holds (or took over) the shard: it does the work; nothing was half-written.
            logger.info("shard busy", extra={"shard": shard, "reason": exc.message})
            summary.lease_busy.append(shard)
    metrics.add_metric(name="RunsSkipped", unit=MetricUnit.Count, value=summary.runs_skipped)
    for name, count in skipped_metrics(summary).items():
        metrics.add_metric(name=name, unit=MetricUnit.Count, value=count)
    metrics.add_metric(name="RunsDispatched", unit=MetricUnit.Count, value=summary.runs_created)
    metrics.add_metric(name="JobsAdvanced", unit=MetricUnit.Count, value=summary.jobs_advanced)
    metrics.add_metric(name="SendFailures", unit=MetricUnit.Count, value=summary.send_failures)
    metrics.add_metric(name="StaleJobs", unit=MetricUnit.Count, value=summary.jobs_stale)
    metrics.add_metric(name="ShardsBusy", unit=MetricUnit.Count, value=len(summary.lease_busy))
    metrics.add_metric(name=JOBS_HELD_BACK, unit=MetricUnit.Count, value=summary.jobs_held_back)
    metrics.add_metric(name=JOBS_CAPPED, unit=MetricUnit.Count, value=summary.jobs_capped)
    result = summary.to_dict()
    # A tick that found nothing due is logged at DEBUG: one line per shard and minute on AWS (one per
    # second in the embedded mode) saying nothing happened would drown the lines about runs.
    idle = not summary.jobs_seen and not summary.lease_busy
    (logger.debug if idle else logger.info)("dispatch tick", extra={"summary": result})
    return result
