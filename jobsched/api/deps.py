"""Route dependencies (Powertools ``Depends``): the caller's identity and the services, per request.

The resolver (:mod:`jobsched.api.app`) authenticates every request before routing and puts in the
request context the caller's :class:`~jobsched.api.auth.Identity`, the :class:`ApiServices` it was
built with and its authenticator. A route declares what it uses, typed (``tenant: Tenant``,
``jobs: JobsDep``), and Powertools resolves each once per request; routes take the tenant from here
and pass it to the services. Nothing reads a tenant from the body or the query string.

A test can swap any provider below for its own: ``app.dependency_overrides[job_service] = lambda: fake``.
(No ``from __future__ import annotations`` here: see :mod:`jobsched.api.routes`.)
"""

from dataclasses import dataclass, field
from typing import Annotated, TypeVar

from aws_lambda_powertools.event_handler import Depends
from aws_lambda_powertools.event_handler.request import Request

from jobsched.api.auth import Authenticator, Identity
from jobsched.api.errors import ForbiddenError
from jobsched.api.idempotency import IdempotencyStore
from jobsched.api.quotas import JobQuota
from jobsched.api.run_logs import RunLogs
from jobsched.api.tenants import PrincipalStore
from jobsched.aws.queue_depths import QueueDepths
from jobsched.aws.run_stats_store import RunStatsStore
from jobsched.aws.state_listing import StateListing
from jobsched.aws.tenant_limits import TenantLimits
from jobsched.aws.usage_store import UsageStore
from jobsched.console import ConsoleConfig
from jobsched.core.clock import Clock
from jobsched.core.errors import UnauthorizedError
from jobsched.services.backfills import BackfillService
from jobsched.services.budgets import BudgetService
from jobsched.services.dead_letters import DeadLetterService
from jobsched.services.forecast import ForecastService
from jobsched.services.handlers import HandlerService
from jobsched.services.jobs import JobService
from jobsched.services.notifications import TenantNotifySettings
from jobsched.services.runs import RunService
from jobsched.services.workflow_service import WorkflowService

IDENTITY_CONTEXT_KEY = "jobsched_identity"
SERVICES_CONTEXT_KEY = "jobsched_services"
AUTHENTICATOR_CONTEXT_KEY = "jobsched_authenticator"

_T = TypeVar("_T")


@dataclass
class ApiServices:
    """Everything the routes call. ``None`` for a service leaves its routes out (framework tests)."""

    clock: Clock
    principals: PrincipalStore | None = None
    idempotency: IdempotencyStore | None = None
    quota: JobQuota | None = None
    jobs: JobService | None = None
    runs: RunService | None = None
    dead_letters: DeadLetterService | None = None
    notify_settings: TenantNotifySettings | None = None
    run_logs: RunLogs = field(default_factory=RunLogs)
    console: ConsoleConfig = field(default_factory=ConsoleConfig)
    tenant_limits: TenantLimits | None = None
    usage: UsageStore | None = None
    worker_memory_mb: int = 1024
    workflows: WorkflowService | None = None
    backfills: BackfillService | None = None  # backfills over the synchronous size answer 202 with it
    handlers: HandlerService | None = None  # the /handlers routes
    forecast: ForecastService | None = None  # GET /forecast
    run_stats: RunStatsStore | None = None  # GET /stats
    queue_depths: QueueDepths | None = None  # GET /stats/queues
    budgets: BudgetService | None = None  # GET /budget, /admin/tenants/.../budget (decision 0062)


# --- the caller -----------------------------------------------------------------------------------


def current_identity(request: Request) -> Identity:
    identity = request.context.get(IDENTITY_CONTEXT_KEY)
    if not isinstance(identity, Identity):
        raise UnauthorizedError("this route needs an authenticated caller")
    return identity


def current_tenant(request: Request) -> str:
    """The calling tenant; 401 when the identity maps to no tenant."""
    return tenant_of(current_identity(request))


def tenant_of(identity: Identity) -> str:
    """The tenant of ``identity``; 401 when it maps to no tenant."""
    if identity.tenant is None:
        raise UnauthorizedError(
            f"principal {identity.principal} is mapped to no tenant; an administrator maps it with "
            "PUT /admin/principals"
        )
    return identity.tenant


def require_admin(request: Request) -> Identity:
    """The calling administrator; 403 for anyone not listed in JOBSCHED_ADMIN_PRINCIPALS."""
    identity = current_identity(request)
    if not identity.is_admin:
        raise ForbiddenError(f"principal {identity.principal} is not an administrator")
    return identity


# --- the services -----------------------------------------------------------------------------------


def api_services(request: Request) -> ApiServices:
    """The services of the resolver serving this request."""
    services = request.context.get(SERVICES_CONTEXT_KEY)
    if not isinstance(services, ApiServices):
        raise RuntimeError("the resolver put no services in the request context")
    return services


def _wired(service: _T | None, name: str) -> _T:
    # A route is included only with its service (jobsched.api.app.build_app): never None here.
    if service is None:
        raise RuntimeError(f"a route needs the {name} service, which this API was built without")
    return service


def authenticator(request: Request) -> Authenticator:
    """How the resolver serving this request authenticates (its mode is the console's sign-in)."""
    found = request.context.get(AUTHENTICATOR_CONTEXT_KEY)
    if not isinstance(found, Authenticator):
        raise RuntimeError("the resolver put no authenticator in the request context")
    return found


def console_config(request: Request) -> ConsoleConfig:
    return api_services(request).console


def clock(request: Request) -> Clock:
    return api_services(request).clock


def principal_store(request: Request) -> PrincipalStore:
    return _wired(api_services(request).principals, "principals")


def idempotency_store(request: Request) -> IdempotencyStore | None:
    """Where ``Idempotency-Key`` answers are kept; without one the header is not honoured."""
    return api_services(request).idempotency


def job_quota(request: Request) -> JobQuota | None:
    """The tenant's job limit; without one jobs are not counted."""
    return api_services(request).quota


def job_service(request: Request) -> JobService:
    return _wired(api_services(request).jobs, "jobs")


def backfill_service(request: Request) -> BackfillService | None:
    """Backfills over the synchronous size; without it every backfill is made within the request."""
    return api_services(request).backfills


def run_service(request: Request) -> RunService:
    return _wired(api_services(request).runs, "runs")


def run_listing(request: Request) -> StateListing:
    """The tenant's runs by state (the in-flight ledger, the dead-letter index) on the runs' table."""
    store = run_service(request).runs
    return StateListing(store.dynamo, store.table)


def run_logs(request: Request) -> RunLogs:
    return api_services(request).run_logs


def handler_service(request: Request) -> HandlerService:
    return _wired(api_services(request).handlers, "handlers")


def workflow_service(request: Request) -> WorkflowService:
    return _wired(api_services(request).workflows, "workflows")


def dead_letter_service(request: Request) -> DeadLetterService:
    return _wired(api_services(request).dead_letters, "dead letters")


def notify_settings(request: Request) -> TenantNotifySettings:
    return _wired(api_services(request).notify_settings, "notify settings")


def tenant_limits(request: Request) -> TenantLimits:
    return _wired(api_services(request).tenant_limits, "tenant limits")


def usage_store(request: Request) -> UsageStore:
    return _wired(api_services(request).usage, "usage")


def forecast_service(request: Request) -> ForecastService:
    return _wired(api_services(request).forecast, "forecast")


def run_stats_store(request: Request) -> RunStatsStore:
    return _wired(api_services(request).run_stats, "run stats")


def queue_depths(request: Request) -> QueueDepths:
    return _wired(api_services(request).queue_depths, "queue depths")


def budget_service(request: Request) -> BudgetService:
    return _wired(api_services(request).budgets, "budgets")


def worker_memory_mb(request: Request) -> int:
    """The worker functions' memory, which prices a run's GB-seconds in ``GET /usage``."""
    return api_services(request).worker_memory_mb


Tenant = Annotated[str, Depends(current_tenant)]
Admin = Annotated[Identity, Depends(require_admin)]
Caller = Annotated[Identity, Depends(current_identity)]
ClockDep = Annotated[Clock, Depends(clock)]
AuthenticatorDep = Annotated[Authenticator, Depends(authenticator)]
ConsoleDep = Annotated[ConsoleConfig, Depends(console_config)]
PrincipalsDep = Annotated[PrincipalStore, Depends(principal_store)]
IdempotencyDep = Annotated[IdempotencyStore | None, Depends(idempotency_store)]
QuotaDep = Annotated[JobQuota | None, Depends(job_quota)]
JobsDep = Annotated[JobService, Depends(job_service)]
BackfillsDep = Annotated[BackfillService | None, Depends(backfill_service)]
RunsDep = Annotated[RunService, Depends(run_service)]
RunListingDep = Annotated[StateListing, Depends(run_listing)]
RunLogsDep = Annotated[RunLogs, Depends(run_logs)]
HandlersDep = Annotated[HandlerService, Depends(handler_service)]
WorkflowsDep = Annotated[WorkflowService, Depends(workflow_service)]
DeadLettersDep = Annotated[DeadLetterService, Depends(dead_letter_service)]
NotifySettingsDep = Annotated[TenantNotifySettings, Depends(notify_settings)]
TenantLimitsDep = Annotated[TenantLimits, Depends(tenant_limits)]
UsageDep = Annotated[UsageStore, Depends(usage_store)]
WorkerMemoryDep = Annotated[int, Depends(worker_memory_mb)]
ForecastDep = Annotated[ForecastService, Depends(forecast_service)]
RunStatsDep = Annotated[RunStatsStore, Depends(run_stats_store)]
QueueDepthsDep = Annotated[QueueDepths, Depends(queue_depths)]
BudgetsDep = Annotated[BudgetService, Depends(budget_service)]
