"""The forecast's reads (decision 0054): the due index's keys with their cursors, the jobs' schedules
(cached), and the runs the in-flight ledger names as queued ahead.

Cost, per forecast: one keys-only Query per due partition (32; each at least 0.5 RRU, then 0.5 RRU per
4 KB of about 60-byte keys), one Query per ledger partition (4; the same items the sweeper reads each
minute, about 60 bytes a run in flight), and a ``BatchGetItem`` (0.5 RRU a job, eventually
consistent, projected to the schedule's attributes) only for jobs not read in the last
``cache_seconds``: a job's schedule, zone, pool and priority are kept that long in the process (an
edit shows within it); its cursor comes fresh from the index every time. docs/performance.md prices it.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from jobsched.core.errors import ValidationError
from jobsched.core.forecast import JobView, Queued, parse_entry
from jobsched.core.ids import DUE_PARTITIONS, partition_key
from jobsched.core.inflight import names_tenant, partitions
from jobsched.core.instants import from_epoch_ms, to_epoch_ms
from jobsched.core.pools import LAMBDA_POOL
from jobsched.core.schedules import Schedule, parse_schedule
from jobsched.ports.tables import Table

DUE_INDEX = "due_index"
#: How long a job's schedule, pool and priority are reused before they are read again.
DEFAULT_CACHE_SECONDS = 900
_ATTRIBUTES = (
    "tenant",
    "job_id",
    "schedule",
    "timezone",
    "dst_gap",
    "dst_overlap",
    "pool",
    "priority",
    "state",
)
_BATCH = 100


class ForecastReads:
    """Reads for :func:`jobsched.core.forecast.build_forecast` (Jobs and Runs tables injected)."""

    def __init__(
        self,
        jobs: Table,
        jobs_table: str,
        runs: Table,
        runs_table: str,
        *,
        cache_seconds: float = DEFAULT_CACHE_SECONDS,
    ):
        self.jobs = jobs
        self.jobs_table = jobs_table
        self.runs = runs
        self.runs_table = runs_table
        self.cache_for = timedelta(seconds=cache_seconds)
        self._cache: dict[tuple[str, str], tuple[datetime, JobView | None]] = {}

    def jobs_due(self, until: datetime, now: datetime, tenant: str | None = None) -> list[JobView]:
        """Every job whose cursor is at or before ``until``, its cursor read from the index now."""
        cursors: dict[tuple[str, str], datetime] = {}
        for p in range(DUE_PARTITIONS):
            for item in self.jobs.query_all(
                self.jobs_table,
                "due_shard = :s AND due_at <= :u",
                {":s": partition_key(p), ":u": to_epoch_ms(until)},
                index=DUE_INDEX,
            ):
                if tenant is None or item["tenant"] == tenant:
                    cursors[(item["tenant"], item["job_id"])] = from_epoch_ms(item["due_at"])
        views = self._views(list(cursors), now)
        return [
            JobView(v.tenant, v.job_id, v.pool, v.priority, v.schedule, cursors[(v.tenant, v.job_id)])
            for v in views
        ]

    def queued_ahead(self, now: datetime, until: datetime, tenant: str | None = None) -> list[Queued]:
        """The runs the ledger names that are scheduled in ``[now, until)``, with their jobs' pool and
        priority (an entry of a job that no longer exists is left out)."""
        wanted: list[tuple[tuple[str, ...], str, datetime, str]] = []
        for partition in partitions():
            for item in self.runs.query_all(self.runs_table, "job_id = :p", {":p": partition}):
                tenants = tuple(item.get("tenants", ()))
                if not tenants or (tenant is not None and not names_tenant(item, tenant)):
                    continue  # an item without tenants predates them: its runs are all due by now
                for entry in item.get("runs", ()):
                    parsed = parse_entry(entry)
                    if parsed and now <= parsed[0] < until:
                        at, job, key = parsed
                        wanted.append((tenants if tenant is None else (tenant,), job, at, key))
        keys = list(dict.fromkeys((t, job) for tenants, job, _, _ in wanted for t in tenants))
        views = {(v.tenant, v.job_id): v for v in self._views(keys, now)}
        out: list[Queued] = []
        for tenants, job, at, key in wanted:
            for t in tenants:
                view = views.get((t, job))
                if view is not None:
                    out.append(Queued(t, view.pool, view.priority, at, job_id=job, run_key=key))
                    break
        return out

    def _views(self, keys: list[tuple[str, str]], now: datetime) -> list[JobView]:
        """The cached views of ``keys``, reading the ones not read within ``cache_for``."""
        for key in [k for k, (read, _) in self._cache.items() if now - read >= self.cache_for]:
            del self._cache[key]  # the cache holds only what was read within cache_for
        stale = [k for k in keys if k not in self._cache]
        for i in range(0, len(stale), _BATCH):
            chunk = stale[i : i + _BATCH]
            found: dict[tuple[str, str], JobView] = {}
            items = self.jobs.batch_get(
                self.jobs_table, [{"tenant": t, "job_id": j} for t, j in chunk], attributes=_ATTRIBUTES
            )
            for item in items:
                found[(item["tenant"], item["job_id"])] = _view(item)
            for key in chunk:
                self._cache[key] = (now, found.get(key))
        views = [self._cache[k][1] for k in keys if k in self._cache]
        return [v for v in views if v is not None]


def _view(item: dict[str, Any]) -> JobView:
    schedule: Schedule | None
    try:
        schedule = parse_schedule(
            item["schedule"],
            item.get("timezone", "UTC"),
            dst_gap=item.get("dst_gap", "shift"),
            dst_overlap=item.get("dst_overlap", "first"),
        )
    except (ValidationError, KeyError):
        schedule = None  # a schedule that no longer parses forecasts nothing (the dispatcher reports it)
    return JobView(
        item["tenant"],
        item["job_id"],
        item.get("pool") or LAMBDA_POOL,
        item.get("priority", "default"),
        schedule,
        None,
    )
