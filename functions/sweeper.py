"""Lambda entry point of the sweeper (an EventBridge schedule, every few minutes): one sweep, a summary."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger

from jobsched.aws.clients import Clients
from jobsched.compose.pipeline import sweeper_from_settings
from jobsched.core.clock import Clock
from jobsched.runtime import observability as obs
from jobsched.runtime.clock import SystemClock
from jobsched.runtime.lazy import lazy
from jobsched.runtime.settings import Settings
from jobsched.services.sweeper import Sweeper

logger = Logger(service="jobsched-sweeper")
metrics = obs.make_metrics("sweeper")
obs.configure_function_logging(logger)
clock: Clock = SystemClock()


@lazy
def sweeper() -> Sweeper:
    """The sweeper, built on first use and kept for the container's lifetime."""
    return sweeper_from_settings(Settings.from_env(), Clients(), metrics=obs.PowertoolsSink(metrics))


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    summary = sweeper().sweep(clock.now()).to_dict()
    logger.info("sweep done", extra=summary)
    return summary
