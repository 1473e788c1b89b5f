"""The forecast service: runs due per minute for the next hour, per pool and priority (decision 0054).

Reads through a :class:`~jobsched.ports.capacity.ForecastSource` (the due index's jobs and the runs
queued ahead) and builds the forecast in the core (:func:`jobsched.core.forecast.build_forecast`).
``tenant`` scopes the reads to one tenant (``GET /forecast`` for a tenant); ``None`` is every tenant
(an administrator's view, and the capacity service's). ``reuse_seconds`` keeps the whole-deployment
forecast that long in the process, so a capacity tick every minute reads the index only every few
minutes (its cost: docs/performance.md); a tenant's forecast is always read afresh.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from jobsched.core.forecast import WINDOW_MINUTES, Forecast, build_forecast, pool_needs, window_start
from jobsched.ports.capacity import ForecastSource

#: Seconds a run takes, per pool, when the forecast turns runs into concurrency (a setting: the
#: measured ``RunDuration`` p50 of the deployment is the right figure).
DEFAULT_RUN_SECONDS = {"lambda": 1.0, "long": 60.0, "container": 300.0}
#: Start lag the needed concurrency is sized for (issue 31's goal: p99 < 5 s at a peak).
DEFAULT_START_WITHIN_SECONDS = 5.0


@dataclass(frozen=True)
class ForecastConfig:
    run_seconds: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_RUN_SECONDS))
    start_within_seconds: float = DEFAULT_START_WITHIN_SECONDS
    reuse_seconds: float = 300.0


class ForecastService:
    """Builds forecasts (and the concurrency each coming minute needs) from the source's reads."""

    def __init__(self, config: ForecastConfig, source: ForecastSource):
        self.config = config
        self.source = source
        self._kept: tuple[datetime, Forecast] | None = None

    def forecast(self, now: datetime, tenant: str | None = None) -> Forecast:
        """Runs due from ``now``'s minute for :data:`WINDOW_MINUTES` minutes (``tenant``'s only, if given)."""
        if tenant is None and self._kept is not None:
            made, kept = self._kept
            if timedelta(0) <= now - made < timedelta(seconds=self.config.reuse_seconds):
                return _shifted(kept, now)
        end = window_start(now) + timedelta(minutes=WINDOW_MINUTES)
        # The index before the ledger: a tick records a run in the ledger before it advances the job's
        # cursor past it, so an occurrence dispatched between the two reads is in both (counted once by
        # build_forecast), never in neither (jobsched.core.forecast's docstring).
        jobs = self.source.jobs_due(end, now, tenant)
        queued = self.source.queued_ahead(now, end, tenant)
        built = build_forecast(now, queued, jobs)
        if tenant is None:
            self._kept = (now, built)
        return built

    def needs(self, forecast: Forecast) -> dict[str, list[int]]:
        """Per queue kind, the concurrency each minute of ``forecast`` needs."""
        return pool_needs(forecast, self.config.run_seconds, self.config.start_within_seconds)


def _shifted(kept: Forecast, now: datetime) -> Forecast:
    """``kept`` seen from ``now``'s minute: the minutes already past dropped, the new ones at the end
    empty (the next read fills them; they are beyond the pre-warm lead)."""
    start = window_start(now)
    skip = int((start - kept.start) // timedelta(minutes=1))
    if skip == 0:
        return kept
    moved = Forecast(start=start)
    for key, lane in kept.lanes.items():
        copy = type(lane)(lane.pool, lane.priority)
        copy.counts = lane.counts[skip:] + [0] * skip
        copy.bursts = lane.bursts[skip:] + [0] * skip
        moved.lanes[key] = copy
    return moved
