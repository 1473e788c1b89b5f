"""``GET /health``: liveness without credentials (no AWS call, so it cannot leak or fail on them)."""

from aws_lambda_powertools.event_handler.api_gateway import Router

from jobsched import __version__
from jobsched.api.deps import ClockDep
from jobsched.api.schemas import HealthOut, iso_z

router = Router()


@router.get("/health", tags=["health"], summary="Liveness (no auth)")
def health(clock: ClockDep) -> HealthOut:
    return HealthOut(version=__version__, time=iso_z(clock.now()))
