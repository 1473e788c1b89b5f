"""Lambda entry point of the capacity service (an EventBridge schedule, once a minute): one tick.

It raises each worker mapping's ``MaximumConcurrency`` (with ``capacity_max_provisioned``, the
provisioned concurrency of the worker's alias; with ``capacity_max_warm_tasks``, the container pool's
minimum task count) before a forecast peak and while runs wait too long, within the
deployment's caps, and lowers it after (decision 0055, docs/scaling.md). The service
is built once per container, on the first invocation, from what :data:`seam` holds (clock, settings,
clients, meter, metric sink: :mod:`jobsched.compose.seam`); the policy and the mappings' UUIDs come from
the function's own variables (:func:`jobsched.compose.capacity.capacity_policy_from_env`)."""

from __future__ import annotations

import os
from typing import Any

from aws_lambda_powertools import Logger

from jobsched.aws.capacity import AwsCapacity
from jobsched.compose.capacity import (
    capacity_policy_from_env,
    container_service_from_env,
    worker_alias_from_env,
)
from jobsched.compose.pipeline import capacity_service_from_settings, function_usage_from_settings
from jobsched.compose.seam import Parts, Seam
from jobsched.core.usage import DEPLOYMENT
from jobsched.runtime import observability as obs
from jobsched.services.capacity import CapacityService
from jobsched.services.usage import FunctionUsage, TenantMeter

logger = Logger(service="jobsched-capacity")
metrics = obs.make_metrics("capacity")
obs.configure_function_logging(logger)


def build(parts: Parts) -> tuple[CapacityService, FunctionUsage]:
    """The capacity service over the worker mappings and its usage counting, built on first use and
    kept. It serves no one tenant: its requests and duration go to the deployment row (without an
    installed meter, a per-tenant one whose every figure is :data:`DEPLOYMENT`'s; decision 0059
    amended)."""
    settings, clients = parts.read_settings(), parts.make_clients()
    policy, mappings = capacity_policy_from_env(os.environ)
    service = container_service_from_env(os.environ, policy)
    sink = parts.metrics_or(obs.PowertoolsSink(metrics))
    # The container pool (with capacity_max_warm_tasks): its scalable target's minimum, never the
    # desired count its step scaling sets; the worker's alias (with capacity_max_provisioned).
    capacity = AwsCapacity(
        clients.client("lambda"),
        None,
        mappings,
        alias=worker_alias_from_env(os.environ, policy),
        service=service,
        autoscaling_client=clients.client("application-autoscaling") if service else None,
    )
    meter = parts.meter if parts.meter is not None else TenantMeter(only=DEPLOYMENT)
    built = capacity_service_from_settings(settings, clients, capacity, policy, metrics=sink, meter=meter)
    return built, function_usage_from_settings(settings, clients, parts.clock, meter, "capacity")


seam = Seam("functions.capacity", build, uses=("clock", "settings", "clients", "meter", "metrics"))


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    service, usage = seam.services()
    with usage.invocation():  # its cost: the deployment row's (one write a minute)
        report = service.tick(seam.clock.now())
    summary = {
        "ceilings": report.plan.ceilings,
        "changed": {kind: list(change) for kind, change in report.changed.items()},
        "refused": report.refused,
    }
    logger.info("capacity tick done", extra=summary)
    return summary
