"""Lambda entry point of the HTTP API (API Gateway HTTP API, payload format 2.0).

Thin on purpose: the resolver is built once per container (on the first event, so importing this
module creates no AWS client) and every event is handed to it. On AWS a container serves one
invocation at a time; where one process serves requests concurrently (the embedded mode's threaded
HTTP bridge), each request in flight gets a resolver of its own (``ResolverPool``), so a slow request
never holds up the others. Routes, auth and error mapping live
in :mod:`jobsched.api`. The app is built from the environment and what :data:`seam` holds (clock,
clients: :mod:`jobsched.compose.seam`).
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.logging import correlation_paths

from jobsched.api.app import ResolverPool
from jobsched.compose.api import app_from_env
from jobsched.compose.pipeline import function_usage_from_settings
from jobsched.compose.seam import Parts, Seam
from jobsched.runtime import observability as obs
from jobsched.services.usage import FunctionUsage, TenantMeter

logger = Logger(service="jobsched-api")
obs.configure_function_logging(logger)


def build(parts: Parts) -> tuple[ResolverPool, FunctionUsage]:
    """The container's resolver, built on first use (once, even if first requests race), in a pool
    that gives concurrent invocations in one process (the embedded mode) a resolver each; and the
    usage counting of its requests, each the caller's tenant's (decision 0059)."""
    clients, meter = parts.make_clients(), TenantMeter()
    pool = ResolverPool(app_from_env(clients=clients, clock=parts.clock, meter=meter))
    return pool, function_usage_from_settings(parts.read_settings(), clients, parts.clock, meter, "api")


seam = Seam("functions.api", build, uses=("clock", "clients"))


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    pool, usage = seam.services()
    with usage.invocation():  # then one usage write for the caller's tenant (decision 0059)
        return pool.resolve(event, context)
