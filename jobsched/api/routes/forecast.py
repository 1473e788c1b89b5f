"""``GET /forecast``: runs due per minute for the next hour, per pool and priority (decision 0054).

A tenant sees its own runs' forecast; an administrator every tenant's, or one tenant's with
``?tenant=``. Each lane adds ``needed``: the concurrency each minute needs for its runs to start within
the deployment's target lag (the figure the capacity service pre-warms for).
"""

from typing import Annotated

from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Query
from pydantic import BaseModel, Field

from jobsched.api.auth import TENANT_PATTERN
from jobsched.api.deps import Caller, ClockDep, ForecastDep
from jobsched.api.errors import ForbiddenError
from jobsched.core.errors import UnauthorizedError
from jobsched.core.forecast import needed_concurrency

router = Router()


class ForecastLaneOut(BaseModel):
    pool: str = Field(description="lambda, long or container")
    priority: str = Field(description="high, default or low")
    queue: str = Field(description="the queue kind its runs go to")
    counts: list[int] = Field(description="runs due in each minute of `minutes`")
    bursts: list[int] = Field(description="the most runs due in one second of each minute")
    needed: list[int] = Field(description="the concurrency each minute needs to start its runs in time")
    total: int


class ForecastOut(BaseModel):
    start: str = Field(description="the current minute, UTC: minute 0")
    minutes: list[str] = Field(description="the 60 minutes' starts, UTC")
    total: int = Field(description="runs due in the hour")
    tenant: str | None = Field(description="the tenant forecast; null: every tenant (administrators)")
    start_within_seconds: float = Field(description="the start lag `needed` is sized for")
    lanes: list[ForecastLaneOut]


@router.get(
    "/forecast", tags=["runs"], summary="Runs due per minute for the next hour, per pool and priority"
)
def forecast(
    identity: Caller,
    service: ForecastDep,
    clock: ClockDep,
    tenant: Annotated[
        str | None,
        Query(pattern=TENANT_PATTERN.pattern, max_length=128, description="administrators: one tenant"),
    ] = None,
) -> ForecastOut:
    if not identity.is_admin:
        if identity.tenant is None:
            raise UnauthorizedError(f"principal {identity.principal} is mapped to no tenant")
        if tenant is not None and tenant != identity.tenant:
            raise ForbiddenError("a tenant sees its own forecast only; leave tenant out")
        tenant = identity.tenant
    built = service.forecast(clock.now(), tenant=tenant).to_dict()
    config = service.config
    lanes = []
    for lane in built["lanes"]:
        seconds = config.run_seconds.get(lane["pool"], config.run_seconds.get("lambda", 1.0))
        needed = [
            needed_concurrency(c, b, seconds, config.start_within_seconds)
            for c, b in zip(lane["counts"], lane["bursts"], strict=True)
        ]
        lanes.append(ForecastLaneOut(**lane, needed=needed))
    return ForecastOut(
        start=built["start"],
        minutes=built["minutes"],
        total=built["total"],
        tenant=tenant,
        start_within_seconds=config.start_within_seconds,
        lanes=lanes,
    )
