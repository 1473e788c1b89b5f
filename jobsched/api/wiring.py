"""Build the API from the environment: settings, clients, services, authenticator.

The one place that knows which concrete service backs which route. ``functions/api.py`` calls
:func:`app_from_env` once per container; tests call :func:`build_services` with moto clients and a
fake clock.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping

from jobsched.api.app import ApiServices, JobschedResolver, build_app
from jobsched.api.auth import AuthConfig, Authenticator
from jobsched.api.idempotency import IdempotencyStore
from jobsched.api.quotas import DEFAULT_MAX_JOBS_PER_TENANT, ENV_MAX_JOBS_PER_TENANT, JobQuota
from jobsched.api.tenants import PrincipalStore
from jobsched.aws.clients import Clients
from jobsched.core.clock import Clock, SystemClock
from jobsched.settings import Settings

#: Comma-separated modules that register job handlers (``@job``); the API imports them so that an
#: unknown handler is refused when a job is created. ``jobsched.demo_handlers`` is always loaded.
ENV_HANDLER_MODULES = "JOBSCHED_HANDLER_MODULES"
DEFAULT_HANDLER_MODULES = ("jobsched.demo_handlers",)


def load_handler_modules(env: Mapping[str, str]) -> None:
    extra = tuple(m.strip() for m in env.get(ENV_HANDLER_MODULES, "").split(",") if m.strip())
    for module in (*DEFAULT_HANDLER_MODULES, *extra):
        importlib.import_module(module)


def max_jobs_per_tenant(env: Mapping[str, str]) -> int:
    raw = env.get(ENV_MAX_JOBS_PER_TENANT, "").strip()
    if not raw:
        return DEFAULT_MAX_JOBS_PER_TENANT
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"{ENV_MAX_JOBS_PER_TENANT} must be an integer, got {raw!r}") from None


def build_services(
    settings: Settings, clients: Clients, clock: Clock, *, max_jobs: int = DEFAULT_MAX_JOBS_PER_TENANT
) -> ApiServices:
    from jobsched.aws.attempts import AttemptStore
    from jobsched.aws.outputs import OutputStore
    from jobsched.dead_letters import DeadLetterService
    from jobsched.jobs import job_service_from_settings
    from jobsched.runs import RunService
    from jobsched.targets.registry import is_registered

    if settings.idempotency_table:
        idempotency = IdempotencyStore(clients.dynamodb, settings.idempotency_table)
    else:  # same records in the Leases table, under its own key and TTL attribute names
        idempotency = IdempotencyStore(
            clients.dynamodb, settings.leases_table, key_attribute="lease_key", ttl_attribute="expires_at"
        )
    jobs = job_service_from_settings(settings, clients, known_handlers=is_registered)
    runs = RunService(
        runs=jobs.runs,
        attempts=AttemptStore(jobs.runs.dynamo, settings.runs_table),
        jobs=jobs.jobs,
        outputs=OutputStore(clients.s3, settings.bucket),
        sqs=clients.sqs,
        queue_urls=dict(settings.queue_urls),
    )
    return ApiServices(
        clock=clock,
        principals=PrincipalStore(clients.dynamodb, settings.leases_table),
        idempotency=idempotency,
        quota=JobQuota(clients.dynamodb, settings.leases_table, max_jobs),
        jobs=jobs,
        runs=runs,
        dead_letters=DeadLetterService(runs),
    )


def app_from_env(
    env: Mapping[str, str] | None = None, clients: Clients | None = None, clock: Clock | None = None
) -> JobschedResolver:
    env = os.environ if env is None else env
    settings = Settings.from_env(env)
    load_handler_modules(env)
    clients = clients or Clients()
    services = build_services(settings, clients, clock or SystemClock(), max_jobs=max_jobs_per_tenant(env))
    config = AuthConfig.from_env(env)
    return build_app(services, Authenticator(config, services.principals))
