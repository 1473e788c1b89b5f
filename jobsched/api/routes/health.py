"""``GET /health``: liveness without credentials (no AWS call, so it cannot leak or fail on them)."""

from __future__ import annotations

from aws_lambda_powertools.event_handler.api_gateway import Router

from jobsched import __version__
from jobsched.api.schemas import HealthOut, iso_z
from jobsched.core.clock import Clock


def health_router(clock: Clock) -> Router:
    router = Router()

    @router.get("/health", tags=["health"], summary="Liveness (no auth)")
    def health() -> HealthOut:
        return HealthOut(version=__version__, time=iso_z(clock.now()))

    return router
