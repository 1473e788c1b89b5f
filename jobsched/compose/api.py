"""Build the API from the environment: settings, clients, services, authenticator.

The one place that knows which concrete service backs which route. ``functions/api.py`` calls
:func:`app_from_env` once per container; tests call :func:`build_services` with moto clients and a
fake clock.
"""

from __future__ import annotations

import importlib
import os
import secrets
from collections.abc import Mapping
from datetime import datetime

from jobsched.api.app import JobschedResolver, build_app
from jobsched.api.auth import AuthConfig, Authenticator
from jobsched.api.deps import ApiServices
from jobsched.api.idempotency import IdempotencyStore
from jobsched.api.quotas import DEFAULT_MAX_JOBS_PER_TENANT, ENV_MAX_JOBS_PER_TENANT, JobQuota
from jobsched.api.tenants import PrincipalStore
from jobsched.aws.clients import Clients
from jobsched.aws.metering import Meter, dynamo_for
from jobsched.console import ConsoleConfig
from jobsched.core.clock import Clock
from jobsched.runtime.clock import SystemClock
from jobsched.runtime.resources import ENV_HANDLER_MODULES
from jobsched.runtime.settings import Settings

#: ``jobsched.targets.demo`` is always loaded; ``ENV_HANDLER_MODULES`` names the deployment's own.
DEFAULT_HANDLER_MODULES = ("jobsched.targets.demo",)


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


_BASE36 = "0123456789abcdefghijklmnopqrstuvwxyz"
_ID_EPOCH_SPAN_MS = 36**9  # ~3170 years of milliseconds: nine base-36 digits


def newest_first_job_id(now: datetime) -> str:
    """``j`` + nine base-36 digits that *decrease* with the creation instant + 72 random bits.

    The Jobs table sorts a tenant's jobs by id, ascending; with ids like these that order is newest
    first, so ``GET /jobs`` lists the newest jobs first without an index. Ids stay URL-safe, dot-free
    and unguessable (the random part), as :func:`jobsched.services.jobs.new_job_id` promises."""
    remaining = _ID_EPOCH_SPAN_MS - 1 - int(now.timestamp() * 1000)
    digits = []
    for _ in range(9):
        remaining, digit = divmod(remaining, 36)
        digits.append(_BASE36[digit])
    return "j" + "".join(reversed(digits)) + secrets.token_urlsafe(9)


def api_idempotency_store(dynamodb: object, leases_table: str) -> IdempotencyStore:
    return IdempotencyStore(dynamodb, leases_table, key_attribute="lease_key", ttl_attribute="expires_at")


def build_services(
    settings: Settings,
    clients: Clients,
    clock: Clock,
    *,
    max_jobs: int = DEFAULT_MAX_JOBS_PER_TENANT,
    meter: Meter | None = None,
) -> ApiServices:
    """The API's services; with ``meter``, every DynamoDB and SQS call of theirs goes through it (the
    api function's per-tenant meter, decision 0059)."""
    from jobsched.api.run_logs import RunLogs
    from jobsched.aws.attempts import AttemptStore
    from jobsched.aws.handler_store import HandlerMarksStore
    from jobsched.aws.handler_usage import HandlerUsage
    from jobsched.aws.notify_store import TenantSettingsStore
    from jobsched.aws.outputs import OutputStore
    from jobsched.aws.run_stats_store import RunStatsStore
    from jobsched.aws.usage_store import UsageStore
    from jobsched.compose.pipeline import (
        backfill_service_from_settings,
        budget_service_from_settings,
        dispatcher_from_settings,
        forecast_service_from_settings,
        notify_policy_from_settings,
        queue_depths_from_settings,
        run_queues_from_settings,
        tenant_limits_from_settings,
        workflow_engine_from_settings,
    )
    from jobsched.runtime.resources import WORKER_MEMORY_MB
    from jobsched.services.dead_letters import DeadLetterService
    from jobsched.services.handlers import HandlerService
    from jobsched.services.jobs import JobService
    from jobsched.services.notifications import TenantNotifySettings
    from jobsched.services.runs import RunService
    from jobsched.services.workflow_service import WorkflowService
    from jobsched.targets.registry import RegistryCatalog

    # API idempotency records live in the Leases table beside the principal mapping and the job
    # counters: the api function already owns that table, and the idempotency table stays the
    # Powertools store of handlers' external effects.
    dynamodb = dynamo_for(settings, clients.dynamodb, meter) if meter is not None else clients.dynamodb
    idempotency = api_idempotency_store(dynamodb, settings.leases_table)
    dispatcher = dispatcher_from_settings(settings, clients, owner="api", meter=meter)
    catalog = RegistryCatalog()
    # Draining marks and forced deploy-checks live in the Leases table too (decision 0049).
    marks = HandlerMarksStore(dispatcher.runs.dynamo, settings.leases_table)
    jobs = JobService(
        dispatcher.jobs,
        dispatcher.runs,
        dispatcher,
        catalog=catalog,
        draining=marks,
        id_factory=lambda: newest_first_job_id(clock.now()),
        notify_policy=notify_policy_from_settings(settings),
        lambda_time_limit_seconds=settings.lambda_time_limit_seconds,
    )
    runs = RunService(
        runs=jobs.runs,
        attempts=AttemptStore(jobs.runs.dynamo, settings.runs_table),
        jobs=jobs.jobs,
        outputs=OutputStore(clients.s3, settings.bucket),
        queues=run_queues_from_settings(settings, clients, jobs.runs.dynamo),
        budgets=dispatcher.budgets,
    )
    engine = workflow_engine_from_settings(
        settings, clients, jobs.runs.dynamo, replay=runs.replay, caps=dispatcher.budgets
    )
    return ApiServices(
        clock=clock,
        principals=PrincipalStore(dynamodb, settings.leases_table),
        idempotency=idempotency,
        quota=JobQuota(dynamodb, settings.leases_table, max_jobs),
        jobs=jobs,
        runs=runs,
        dead_letters=DeadLetterService(runs),
        notify_settings=TenantNotifySettings(
            TenantSettingsStore(jobs.runs.dynamo, settings.leases_table), jobs.notify_policy
        ),
        run_logs=RunLogs(log_group=settings.run_log_group, log_file=settings.run_log_file),
        tenant_limits=tenant_limits_from_settings(settings, jobs.runs.dynamo),
        usage=UsageStore(jobs.runs.dynamo, settings.leases_table, settings.retention_days),
        worker_memory_mb=WORKER_MEMORY_MB,
        workflows=WorkflowService(jobs, engine),
        backfills=backfill_service_from_settings(settings, clients, dynamo=jobs.runs.dynamo),
        handlers=HandlerService(
            catalog,
            marks,
            HandlerUsage(jobs.runs.dynamo, settings.jobs_table, settings.runs_table),
            code_version=settings.code_version,
        ),
        forecast=forecast_service_from_settings(settings, clients, meter=meter),
        run_stats=RunStatsStore(jobs.runs.dynamo, settings.runs_table, settings.retention),
        queue_depths=queue_depths_from_settings(settings, clients, jobs.runs.dynamo),
        budgets=budget_service_from_settings(settings, jobs.runs.dynamo),
    )


def app_from_env(
    env: Mapping[str, str] | None = None,
    clients: Clients | None = None,
    clock: Clock | None = None,
    meter: Meter | None = None,
) -> JobschedResolver:
    env = os.environ if env is None else env
    settings = Settings.from_env(env)
    load_handler_modules(env)
    clients = clients or Clients()
    services = build_services(
        settings, clients, clock or SystemClock(), max_jobs=max_jobs_per_tenant(env), meter=meter
    )
    services.console = ConsoleConfig.from_env(env)
    config = AuthConfig.from_env(env)
    return build_app(services, Authenticator(config, services.principals))
