"""Lambda entry point of the sweeper (an EventBridge schedule, every few minutes): one sweep, a summary.

The sweeper is built once per container, on the first invocation, from what :data:`seam` holds (clock,
settings, clients, meter, metric sink: :mod:`jobsched.compose.seam`)."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger

from jobsched.compose.pipeline import (
    function_usage_from_settings,
    mapping_polls_from_settings,
    sweeper_from_settings,
)
from jobsched.compose.seam import Parts, Seam
from jobsched.runtime import observability as obs
from jobsched.services.sweeper import Sweeper
from jobsched.services.usage import FunctionUsage, MappingPolls, TenantMeter

#: The sweeper's schedule by default (infra: ``sweeper_rate_minutes``): the first sweep of a container
#: counts the mappings' empty polls of one period.
SWEEP_PERIOD_SECONDS = 300.0

logger = Logger(service="jobsched-sweeper")
metrics = obs.make_metrics("sweeper")
obs.configure_function_logging(logger)


def build(parts: Parts) -> tuple[Sweeper, FunctionUsage, MappingPolls]:
    """The sweeper, its usage counting and the deployment's empty polls, built on first use and kept
    for the container's lifetime (without an installed meter, a per-tenant one: decision 0059)."""
    settings, clients = parts.read_settings(), parts.make_clients()
    sink = parts.metrics_or(obs.PowertoolsSink(metrics))
    meter = parts.meter if parts.meter is not None else TenantMeter()
    sweeper = sweeper_from_settings(settings, clients, metrics=sink, meter=meter)
    usage = function_usage_from_settings(settings, clients, parts.clock, meter, "sweeper")
    return sweeper, usage, mapping_polls_from_settings(settings, SWEEP_PERIOD_SECONDS)


seam = Seam("functions.sweeper", build, uses=("clock", "settings", "clients", "meter", "metrics"))


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    sweeper, usage, polls = seam.services()
    with usage.invocation():  # then one usage write per tenant the sweep served (decision 0059)
        now = seam.clock.now()
        summary = sweeper.sweep(now).to_dict()
        polls.add_to(usage.recorder, now)  # the mappings' empty polls: the deployment row's
    logger.info("sweep done", extra=summary)
    return summary
