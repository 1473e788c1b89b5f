"""The deadline watch: the sweeper's two checks for missed deadlines (decision 0058).

**Runs.** Every run the sweeper reads (the in-flight ledger's, :mod:`jobsched.services.sweeper`) is
judged by :func:`jobsched.core.deadlines.run_missed`: past its ``deadline_at`` and not ended by then.
No extra read: the run is in hand.

**Occurrences without a run.** Once per sweep, one page of the due index per due partition, of jobs
due more than ``grace`` ago (at most ``page_size`` keys each: a bounded read, whatever the history):
a healthy dispatcher leaves none, as it dispatches ahead of the due instant. The jobs found are read
(one BatchGetItem) and each whose ``next_due_at`` is more than ``deadline_seconds`` past is reported:
its dispatch is behind (the dispatcher down, its partition stuck).

**Once.** Both checks report through one marker item per occurrence in the Runs table (partition
``deadline#<job id>``, sort key the run key; TTL with the runs), written with a conditional put: the
first check to write it reports (``RunsMissedDeadline`` + 1, a notification owed); a later one (the
run the dispatcher makes late for an occurrence already reported, a second sweeper, the next sweep)
finds it and reports nothing again. The marker carries the outbox mark of the dead-letter notifier
(:mod:`jobsched.services.notifications`: claim, send to the job's ``notify`` or the tenant's default,
settle), so its deliveries, retries and receivers' deduplication (the notification ``id``) are the
dead letters'. The run item gets ``deadline_missed_at`` once its notification is settled; until then
the run stays in the sweeper's reach and each sweep retries the delivery.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from jobsched.aws.attempts import NOTIFY_PENDING
from jobsched.aws.metering import ConditionFailed
from jobsched.core.deadlines import marker_key, overdue_occurrence, run_missed
from jobsched.core.ids import DUE_PARTITIONS, partition_key, run_key_for
from jobsched.core.models import Job, to_iso
from jobsched.ports.stores import JobRecords
from jobsched.ports.tables import Table
from jobsched.runtime import observability as obs

logger = logging.getLogger(__name__)

#: Due-index keys read per partition and sweep for the occurrence check.
DEFAULT_PAGE_SIZE = 25
#: How long a marker is kept when the deployment names no retention.
DEFAULT_MARKER_TTL = timedelta(days=30)


class Notifier(Protocol):
    """What the watch needs of :class:`jobsched.services.notifications.DeadLetterNotifier`."""

    def deliver(self, item: Mapping[str, Any], now: datetime) -> str: ...


@dataclass(frozen=True)
class DeadlineConfig:
    runs_table: str
    #: How long past due a job must be before the occurrence check reads it.
    grace: timedelta = timedelta(minutes=2)
    page_size: int = DEFAULT_PAGE_SIZE
    #: How long a marker is kept (the runs' retention).
    marker_ttl: timedelta = DEFAULT_MARKER_TTL


@dataclass
class DeadlineSummary:
    runs_missed: int = 0  # runs found past their deadline and reported
    occurrences_missed: int = 0  # occurrences with no run found past their deadline and reported
    jobs_read: int = 0  # overdue jobs the occurrence check read
    owed: int = 0  # reports whose notification is still owed after this sweep


class DeadlineWatch:
    """Finds missed deadlines (see the module docstring). Injected: the Runs table (markers and run
    stamps), the job records (due index, job reads), the notifier and the metrics."""

    def __init__(
        self,
        *,
        config: DeadlineConfig,
        dynamo: Table,
        jobs: JobRecords,
        notifier: Notifier,
        metrics: obs.MetricSink | None = None,
    ):
        self.config = config
        self.dynamo = dynamo
        self.jobs = jobs
        self.notifier = notifier
        self.metrics = metrics or obs.NullSink()
        self.summary = DeadlineSummary()

    def reset(self) -> None:
        """Start a new sweep's counts."""
        self.summary = DeadlineSummary()

    # --- runs --------------------------------------------------------------------------------------

    def check_run(
        self, item: Mapping[str, Any], now: datetime, job_of: Callable[[str, str], Job | None]
    ) -> bool:
        """Report the run ``item`` if it missed its deadline; whether it still owes a report (its
        ledger entry is then kept, so the next sweep tries again)."""
        if not run_missed(item, now):
            return False
        job = job_of(str(item["tenant"]), str(item["job_id"]))
        notify = job.notify if job is not None else {}
        marker = self._report(
            tenant=str(item["tenant"]),
            job_id=str(item["job_id"]),
            run_key=str(item["run_key"]),
            scheduled_at=str(item["scheduled_at"]),
            deadline_at=str(item["deadline_at"]),
            run_state=str(item.get("state")),
            notify=notify,
            now=now,
        )
        if marker is None:
            return True
        try:
            self.dynamo.update(
                self.config.runs_table,
                {"job_id": item["job_id"], "run_key": item["run_key"]},
                "SET deadline_missed_at = if_not_exists(deadline_missed_at, :at)",
                condition="attribute_exists(run_key)",  # never make an item of a run expired meanwhile
                values={":at": marker["missed_at"]},
            )
        except ConditionFailed:
            pass
        return False

    # --- occurrences without a run ------------------------------------------------------------------

    def check_occurrences(self, now: datetime) -> None:
        """Report the jobs whose next occurrence is past its deadline with no run made (one bounded
        page of the due index per partition)."""
        keys: list[tuple[str, str]] = []
        until = now - self.config.grace
        for partition in range(DUE_PARTITIONS):
            page, _ = self.jobs.due_keys(partition_key(partition), until, limit=self.config.page_size)
            keys.extend(page)
        if not keys:
            return
        jobs = self.jobs.get_many(keys)
        self.summary.jobs_read += len(jobs)
        for job in jobs:
            instant = overdue_occurrence(job, now)
            if instant is None:
                continue
            self._report(
                tenant=job.tenant,
                job_id=job.id,
                run_key=run_key_for(instant),
                scheduled_at=to_iso(instant),
                deadline_at=to_iso(instant + timedelta(seconds=job.deadline_seconds)),
                run_state=None,
                notify=job.notify,
                now=now,
            )

    # --- reporting ----------------------------------------------------------------------------------

    def _report(
        self,
        *,
        tenant: str,
        job_id: str,
        run_key: str,
        scheduled_at: str,
        deadline_at: str,
        run_state: str | None,
        notify: Mapping[str, str],
        now: datetime,
    ) -> dict[str, Any] | None:
        """Write the occurrence's marker (first writer reports), deliver its owed notification; the
        marker once nothing is owed any more, else None."""
        key = marker_key(job_id, run_key)
        marker: dict[str, Any] = {
            **key,
            "tenant": tenant,
            "scheduled_at": scheduled_at,
            "deadline_at": deadline_at,
            "missed_at": to_iso(now),
            NOTIFY_PENDING: to_iso(now),
            "expires_at": int((now + self.config.marker_ttl).timestamp()),
        }
        if run_state is not None:
            marker["run_state"] = run_state
        if notify:
            marker["dl_message"] = json.dumps({"notify": dict(notify)})
        try:
            self.dynamo.put(self.config.runs_table, marker, condition="attribute_not_exists(run_key)")
        except ConditionFailed:
            found = self.dynamo.get(self.config.runs_table, key, consistent=True)
            if found is None:
                return None  # expired meanwhile: the next sweep writes it again
            marker = dict(found)
        else:
            if run_state is None:
                self.summary.occurrences_missed += 1
            else:
                self.summary.runs_missed += 1
            self.metrics.add(obs.RUNS_MISSED_DEADLINE)
            logger.warning(
                "%s of job %s scheduled at %s missed its deadline %s (%s)",
                "run" if run_state else "occurrence",
                job_id,
                scheduled_at,
                deadline_at,
                run_state or "no run made",
            )
        if NOTIFY_PENDING in marker and self.notifier.deliver(marker, now) in ("retrying", "skipped"):
            self.summary.owed += 1
            return None
        return marker
