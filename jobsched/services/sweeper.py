"""The sweeper: finds runs that nothing will move on and hands them to a worker again (guarantee 4).

Four ways a run can be stranded, each found by its timestamps:

- **lost send** — ``queued`` and ``due_at`` more than ``grace`` ago: the dispatcher (or a replay)
  wrote the run and died before its message was sent;
- **lost retry** — ``retrying`` and ``retry_at`` more than ``grace`` ago (the worker sends the retry
  before marking the run, so this needs a message lost after the fact);
- **expired lease** — ``running`` and ``lease_until`` more than ``grace`` ago with no message left
  to bring it back (SQS normally redelivers it, and the next worker takes over);
- **stranded replay** — ``replay_pending_at`` more than ``grace`` ago: a replay (or retry) of a failed
  run moved it to ``queued`` and died before sending its message or before its last write
  (:mod:`jobsched.services.runs`). Such a run keeps its ``dead_letter_index`` keys while the replay is
  pending, so it is found by one Query per tenant on that index, whatever its age. Still ``queued``
  at the attempt before the one in ``replay_message``: that exact message (corrected payload
  included) is re-sent, then the marker and index keys are removed; moved on (running, finished,
  failed again): only the removal, conditional on the marker and ``dl_at`` read, so a newer dead
  letter stays. The tenants are those of the Jobs scan: a tenant with no job left is not swept this
  way.

The same Query finds dead letters whose notification is still owed (``notify_pending`` more than
``grace`` ago: a sender that died, a try that failed, a poison dead letter the DLQ consumer only
marked) and hands each to the notifier (:mod:`jobsched.services.notifications`), which claims it
with a conditional write, so a sweep racing the worker's own delivery sends nothing twice.

For each of the first three, the sweeper marks the run (``swept_at``, ``sweeps + 1``, conditional on
the state and attempt it read, so two sweepers never both act) and sends a message for the next
attempt from the job's definition. Duplicates are harmless: the worker's claim is conditional on
state and attempt, and a takeover bumps the attempt (fencing). A run is re-sent at most
``max_sweeps`` times; a queue backlog therefore cannot make the sweeper multiply messages.

Cost: the sweep reads, it writes only for stranded runs. It lists job keys with a Scan of the Jobs
table (billed by the table's size: ~0.5 RRU per 4 KB of jobs) and reads each job's runs scheduled in
the last ``lookback`` with one Query (billed by the size of those runs, about ``lookback / interval``
runs per job). Runs stranded longer than ``lookback`` before a sweep saw them are out of reach; with
the default 30 minutes and a 5-minute sweep that takes six missed sweeps in a row. Stranded replays
cost one Query per tenant on the dead-letter index, billed by the size of the tenant's dead letters
(the filter on ``replay_pending_at`` is applied after the read).
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any

from jobsched.aws.attempts import NOTIFY_PENDING, REPLAY_MESSAGE, REPLAY_PENDING, AttemptStore
from jobsched.aws.jobs_store import JobsStore
from jobsched.aws.metering import ConditionFailed, Dynamo
from jobsched.aws.queues import send_run_message
from jobsched.aws.runs_store import DEAD_LETTER_INDEX
from jobsched.core.errors import ConflictError, NotFoundError
from jobsched.core.messages import RunMessage
from jobsched.core.models import Job, Run, RunState, run_key_for, to_iso
from jobsched.core.run_records import outgoing_for
from jobsched.core.sweeping import stranded_kind
from jobsched.runtime import observability as obs
from jobsched.services.notifications import DeadLetterNotifier
from jobsched.services.runs import finish_replay

logger = logging.getLogger(__name__)

DEFAULT_LOOKBACK = timedelta(minutes=30)
DEFAULT_GRACE = timedelta(minutes=2)
DEFAULT_MAX_SWEEPS = 3


@dataclass
class SweepSummary:
    jobs: int = 0
    runs_examined: int = 0
    resent: int = 0  # lost sends and lost retries
    reclaimed: int = 0  # expired leases
    gave_up: int = 0  # already swept max_sweeps times
    failed: int = 0  # the job is gone: the run is failed (dead letter)
    replays_resent: int = 0  # stranded replays whose message was re-sent
    replays_cleaned: int = 0  # replays whose run had moved on: only the pending marker removed
    notifications: int = 0  # owed dead-letter notifications handed to the notifier

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


class Sweeper:
    """One sweep over every job's recent runs (stores, SQS client and metrics injected)."""

    def __init__(
        self,
        *,
        dynamo: Dynamo,
        jobs_table: str,
        runs_table: str,
        jobs: JobsStore,
        attempts: AttemptStore,
        sqs: Any,
        queue_urls: dict[str, str] | Any,
        metrics: obs.MetricSink | None = None,
        lookback: timedelta = DEFAULT_LOOKBACK,
        grace: timedelta = DEFAULT_GRACE,
        max_sweeps: int = DEFAULT_MAX_SWEEPS,
        notifier: DeadLetterNotifier | None = None,
    ):
        self.dynamo = dynamo
        self.jobs_table = jobs_table
        self.runs_table = runs_table
        self.jobs = jobs
        self.attempts = attempts
        self.sqs = sqs
        self.queue_urls = queue_urls
        self.metrics = metrics or obs.NullSink()
        self.lookback = lookback
        self.grace = grace
        self.max_sweeps = max_sweeps
        #: Delivers owed dead-letter notifications; None: they are left to another sweeper.
        self.notifier = notifier

    def sweep(self, now: datetime) -> SweepSummary:
        """Examine the runs scheduled in ``[now - lookback, now]`` of every job and re-send the stranded."""
        summary = SweepSummary()
        keys = self._job_keys()
        for tenant, job_id in keys:
            summary.jobs += 1
            jobs: list[Job | None] = []  # the job, read once and only when one of its runs is stranded
            for item in self._active_runs(job_id, now):
                summary.runs_examined += 1
                kind = self._stranded(item, now)
                if kind is None:
                    continue
                if not jobs:
                    jobs.append(self._job(tenant, job_id))
                self._rescue(item, kind, jobs[0], now, summary)
        limit = to_iso(now - self.grace)
        for tenant in sorted({tenant for tenant, _ in keys}):
            for item in self._pending(tenant, now):
                if item.get(REPLAY_PENDING, "~") < limit:
                    self._finish_replay(item, now, summary)
                elif self.notifier is not None and item.get(NOTIFY_PENDING, "~") < limit:
                    summary.notifications += 1
                    self.notifier.deliver(item, now)
        return summary

    # --- finding ---------------------------------------------------------------------------------

    def _job_keys(self) -> list[tuple[str, str]]:
        items = self.dynamo.scan_all(self.jobs_table, projection="tenant, job_id")
        return [(i["tenant"], i["job_id"]) for i in items]

    def _active_runs(self, job_id: str, now: datetime) -> list[dict[str, Any]]:
        return self.dynamo.query_all(
            self.runs_table,
            "job_id = :j AND run_key BETWEEN :from AND :to",
            {
                ":j": job_id,
                ":from": run_key_for(now - self.lookback),
                ":to": run_key_for(now) + "~",  # "~" sorts after the manual/backfill suffixes
                ":q": "queued",
                ":r": "running",
                ":w": "retrying",
            },
            names={"#state": "state"},
            filter_expression="#state IN (:q, :r, :w)",
        )

    def _pending(self, tenant: str, now: datetime) -> list[dict[str, Any]]:
        """The tenant's runs whose replay began, or whose dead letter's notification was owed, more
        than ``grace`` ago and is not done."""
        return self.dynamo.query_all(
            self.runs_table,
            "dl_tenant = :t",
            {":t": tenant, ":limit": to_iso(now - self.grace)},
            index=DEAD_LETTER_INDEX,
            filter_expression=f"{REPLAY_PENDING} < :limit OR {NOTIFY_PENDING} < :limit",
        )

    def _stranded(self, item: dict[str, Any], now: datetime) -> str | None:
        return stranded_kind(item, now, self.grace)

    def _job(self, tenant: str, job_id: str) -> Job | None:
        try:
            return self.jobs.get(tenant, job_id)
        except NotFoundError:
            return None

    # --- rescuing --------------------------------------------------------------------------------

    def _rescue(
        self, item: dict[str, Any], kind: str, job: Job | None, now: datetime, summary: SweepSummary
    ) -> None:
        run = Run.from_item(item)
        if job is None:
            try:
                self.attempts.fail_unclaimed(
                    run, now, "the run's job was deleted before it ran", "lost", None
                )
                summary.failed += 1
                self.metrics.add(obs.RUNS_DEAD_LETTERED)
            except ConflictError:
                pass
            return
        if int(item.get("sweeps", 0)) >= self.max_sweeps:
            summary.gave_up += 1
            logger.error("run %s is still %s after %s sweeps; leaving it", run.id, run.state, self.max_sweeps)
            return
        condition = "#state = :st AND attempt = :a AND (attribute_not_exists(sweeps) OR sweeps < :max)"
        values: dict[str, Any] = {
            ":st": str(run.state),
            ":a": run.attempt,
            ":max": self.max_sweeps,
            ":now": to_iso(now),
            ":zero": 0,
            ":one": 1,
        }
        if run.attempt == 0:
            condition = condition.replace("attempt = :a", "(attribute_not_exists(attempt) OR attempt = :a)")
        if kind == "reclaim":
            condition += " AND lease_until = :lu"
            values[":lu"] = item["lease_until"]
        try:
            self.dynamo.update(
                self.runs_table,
                {"job_id": run.job_id, "run_key": run.run_key},
                "SET swept_at = :now, sweeps = if_not_exists(sweeps, :zero) + :one",
                condition=condition,
                names={"#state": "state"},
                values=values,
            )
        except ConditionFailed:
            return  # it moved on by itself
        message = outgoing_for(job, run, now).message
        send_run_message(self.sqs, self.queue_urls[message.priority], message, now, self.dynamo.meter)
        if kind == "reclaim":
            summary.reclaimed += 1
            self.metrics.add(obs.RUNS_RECLAIMED)
        else:
            summary.resent += 1
            self.metrics.add(obs.RUNS_RESENT)

    def _finish_replay(self, item: dict[str, Any], now: datetime, summary: SweepSummary) -> None:
        """Re-send a stranded replay's message if its run still waits for it, then do the replay's
        last write (:func:`jobsched.services.runs.finish_replay`)."""
        message = RunMessage.from_json(item[REPLAY_MESSAGE])
        waiting = item.get("state") == RunState.QUEUED and int(item.get("attempt", 0)) + 1 == message.attempt
        if waiting:
            send_run_message(self.sqs, self.queue_urls[message.priority], message, now, self.dynamo.meter)
            summary.replays_resent += 1
            self.metrics.add(obs.RUNS_RESENT)
            logger.warning(
                "replay of run %s was stranded; re-sent attempt %s", message.run_id, message.attempt
            )
        key = {"job_id": item["job_id"], "run_key": item["run_key"]}
        cleaned = finish_replay(self.dynamo, self.runs_table, key, item[REPLAY_PENDING], item["dl_at"])
        if cleaned is not None and not waiting:  # None: done meanwhile, or failed again (a new dead letter)
            summary.replays_cleaned += 1
            logger.info(
                "replay of run %s had moved on (%s); removed its marker", message.run_id, item.get("state")
            )
