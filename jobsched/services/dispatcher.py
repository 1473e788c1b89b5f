"""The dispatcher service: due jobs -> runs -> queue messages, one shard per tick.

Order of the writes, chosen so that a crash at any point leaves a state the next tick (or the
sweeper) completes without duplicates (docs/decisions/0001-data-model.md):

0. once per page: every due job is planned, and all the records and runs the page will create are
   recorded in their tenants' run feeds (docs/decisions/0004-tenant-run-feed.md) — before any put,
   so a crash can leave a feed entry without its run (skipped when listing) but never a run the
   tenant listing cannot see. Then, for each job:
1. skipped occurrences and runs are created with a conditional put on their deterministic ids
   (an id that exists is reused, never duplicated);
2. every run that is (still) ``queued`` is sent — a re-send after a crash is a duplicate delivery, and
   the worker's claim is conditional on state and attempt, so only one delivery executes;
3. only then is the job advanced, with a conditional update on the ``next_due_at``/``version`` it was
   read with and the shard lease's fencing token. A job whose sends failed is not advanced: the next
   tick re-plans it from the same cursor, finds its runs and re-sends them.
4. an advance refused because the job was paused or deleted since the tick read it withdraws the runs
   the tick queued ahead of the pause (or delete): they were created after its own withdrawal.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from jobsched.aws.clients import Clients
from jobsched.aws.jobs_store import JobsStore, StaleJobError
from jobsched.aws.leases import Lease, Leases, shard_lease_key
from jobsched.aws.metering import Meter, dynamo_for
from jobsched.aws.queues import Outgoing, RunQueues
from jobsched.aws.runs_store import RunsStore
from jobsched.core.clock import Clock
from jobsched.core.dispatch_plan import SKIP_REASON_REPLACED, JobPlan, plan_job
from jobsched.core.errors import NotFoundError, ValidationError
from jobsched.core.messages import RunMessage, delay_seconds
from jobsched.core.models import Job, JobState, Run, RunState, Trigger, make_run_id
from jobsched.core.policies import jitter_offset
from jobsched.runtime.settings import Settings
from jobsched.services.backpressure import LowBacklog, TickGate

logger = logging.getLogger(__name__)

SKIP_REASON_PAUSED = "paused"
SKIP_REASON_DELETED = "deleted"


@dataclass
class DispatchSummary:
    """What a tick did (returned by the function, logged, and turned into metrics)."""

    shards: list[int] = field(default_factory=list)
    fences: dict[int, int] = field(default_factory=dict)
    jobs_seen: int = 0
    jobs_advanced: int = 0
    jobs_held: int = 0
    jobs_held_back: int = (
        0  # due low jobs left for a later tick: backpressure (jobsched/services/backpressure.py)
    )
    jobs_stale: int = 0
    jobs_invalid: int = 0
    runs_created: int = 0
    runs_reused: int = 0
    runs_skipped: int = 0
    runs_cancelled: int = 0
    messages_sent: int = 0
    send_failures: int = 0
    lease_busy: list[int] = field(default_factory=list)

    def merge(self, other: DispatchSummary) -> None:
        for name, value in vars(other).items():
            mine = getattr(self, name)
            if isinstance(value, list):
                mine.extend(value)
            elif isinstance(value, dict):
                mine.update(value)
            else:
                setattr(self, name, mine + value)

    def to_dict(self) -> dict:
        return {k: (dict(v) if isinstance(v, dict) else v) for k, v in vars(self).items()}


@dataclass
class _Planned:
    """A due job's plan and the run items it creates (built before the feed write, put after it)."""

    job: Job
    plan: JobPlan
    previous: Run | None
    skipped: list[Run]
    summary_record: Run | None
    fired: list[Run]

    @property
    def records(self) -> list[Run]:
        return self.skipped + ([self.summary_record] if self.summary_record else []) + self.fired


@dataclass
class _Work:
    job: Job
    plan: JobPlan
    keys: list[str]


class Dispatcher:
    """Performs :func:`jobsched.core.dispatch_plan.plan_job` for the due jobs of a shard."""

    def __init__(
        self,
        jobs: JobsStore,
        runs: RunsStore,
        leases: Leases,
        queues: RunQueues,
        *,
        lookahead: timedelta,
        owner: str,
        enqueue_horizon: timedelta | None = None,
        page_size: int = 100,
        max_fires_per_job: int = 500,
        lease_ttl: timedelta = timedelta(seconds=60),
        batch: int = 10,
        clock: Clock | None = None,
        backpressure: LowBacklog | None = None,
    ):
        self.jobs = jobs
        self.runs = runs
        self.leases = leases
        self.queues = queues
        self.lookahead = lookahead
        self.horizon = max(lookahead, enqueue_horizon or lookahead)
        self.owner = owner
        self.page_size = page_size
        self.max_fires_per_job = max_fires_per_job
        self.lease_ttl = lease_ttl
        self.batch = batch
        self.clock = clock  # only for re-checking the lease: a tick that overran it must stop
        self.backpressure = backpressure

    def dispatch_shard(self, shard: int, now: datetime) -> DispatchSummary:
        """One tick of ``shard``: take its lease, page through due jobs, dispatch each page."""
        summary = DispatchSummary(shards=[shard])
        lease = self.leases.acquire(shard_lease_key(shard), self.owner, now, self.lease_ttl)
        summary.fences[shard] = lease.token
        start = None
        gate = self.backpressure.tick() if self.backpressure else None
        try:
            while True:
                keys, start = self.jobs.due_keys(
                    shard, now + self.lookahead, limit=self.page_size, start_key=start
                )
                summary.merge(self.dispatch_jobs(self.jobs.get_many(keys), now, lease=lease, gate=gate))
                if not start:
                    break
            if gate is not None:
                gate.log(shard, summary.jobs_held_back)
        finally:
            # Every write above is idempotent, so handing the shard on early is safe even after an
            # error; a process that dies here instead simply lets the lease expire.
            self.leases.release(lease, now)
        return summary

    def dispatch_jobs(
        self, jobs: list[Job], now: datetime, *, lease: Lease | None = None, gate: TickGate | None = None
    ) -> DispatchSummary:
        """Dispatch the given jobs (a page of a shard, or one job the API just created).

        With a ``lease`` the lease is re-checked before any job is advanced and its token fences every
        advance; without one (the API's immediate dispatch) only the job's own conditions protect it.
        A ``gate`` (the tick's backpressure) may hold due ``low`` jobs back, untouched.
        """
        summary = DispatchSummary(jobs_seen=len(jobs))
        planned: list[_Planned] = []
        for job in jobs:
            due = [t for t in (job.next_due_at, job.buffered_at) if t is not None]
            if not due or min(due) > now + self.lookahead:
                # The index (eventually consistent) lagged behind an advance: nothing is due, write nothing.
                summary.jobs_held += 1
                continue
            if gate is not None and gate.holds(job.priority):
                summary.jobs_held_back += 1
                continue
            previous = self._previous(job)
            try:
                plan = plan_job(
                    job,
                    now,
                    self.horizon,
                    previous,
                    max_fires=self.max_fires_per_job,
                    lookahead=self.lookahead,
                    batch=self.batch,
                )
            except ValidationError as exc:
                summary.jobs_invalid += 1
                logger.warning("job %s has an invalid schedule, not dispatched: %s", job.id, exc.message)
                continue
            if plan.hold:
                summary.jobs_held += 1
                continue
            planned.append(_records(job, plan, previous, now))
        self.runs.announce(run for p in planned for run in p.records)
        work: list[_Work] = []
        outgoing: list[Outgoing] = []
        for p in planned:
            messages = self._perform(p, now, summary)
            outgoing.extend(messages)
            work.append(_Work(p.job, p.plan, [m.key for m in messages]))
        report = self.queues.send(outgoing)
        summary.messages_sent += len(report.sent)
        summary.send_failures += len(report.failed)
        if lease is not None:
            self.leases.check(lease, self.clock.now() if self.clock else now)
        for item in work:
            if any(key in report.failed for key in item.keys):
                continue
            if _bookkeeping(item.job) == _bookkeeping(item.plan.job):
                summary.jobs_held += 1  # e.g. a buffered occurrence still waiting: no write needed
                continue
            try:
                self.jobs.advance(item.job, item.plan.job, lease.token if lease else None)
            except StaleJobError as exc:
                summary.jobs_stale += 1
                logger.info("job %s not advanced: %s", item.job.id, exc.message)
                summary.runs_skipped += self._withdraw_if_stopped(item.job, item.plan, now)
                continue
            summary.jobs_advanced += 1
        return summary

    # --- steps ------------------------------------------------------------------------------------

    def _previous(self, job: Job) -> Run | None:
        if job.overlap_policy == "allow" or not job.last_run_id:
            return None
        return self.runs.find(job.last_run_id)

    def _perform(self, planned: _Planned, now: datetime, summary: DispatchSummary) -> list[Outgoing]:
        """Put the plan's skipped records and runs (already in the feed); return the messages for
        runs still queued."""
        job, plan = planned.job, planned.plan
        outgoing: list[Outgoing] = []
        for record in planned.skipped:
            stored, created = self.runs.put_announced(record)
            summary.runs_skipped += created
            if not created and stored.state is RunState.QUEUED:
                outgoing.append(outgoing_for(job, stored, now))  # created by a crashed tick: finish it
        if planned.summary_record is not None and plan.summary is not None:
            _, created = self.runs.put_announced(planned.summary_record)
            summary.runs_skipped += plan.summary.count if created else 0
        last_run_id = job.last_run_id
        for run in planned.fired:
            stored, created = self.runs.put_announced(run)
            summary.runs_created += created
            summary.runs_reused += not created
            if stored.state is RunState.QUEUED:
                outgoing.append(outgoing_for(job, stored, now))
            last_run_id = stored.id
        if plan.cancel_previous and planned.previous is not None:
            summary.runs_cancelled += self._cancel(planned.previous, now)
        plan.job.last_run_id = last_run_id
        return outgoing

    def _withdraw_if_stopped(self, job: Job, plan: JobPlan, now: datetime) -> int:
        """Withdraw the plan's runs queued ahead of a pause or delete that happened since ``job`` was read.

        The pause withdraws the queued-ahead runs it finds; runs this tick created after that would
        escape it and run while the job is paused. Their advance was refused, so here the ones still
        queued and due after the pause (or this tick, for a deleted job) are recorded skipped as the
        pause would have; their messages then run nothing. Returns how many were withdrawn.
        """
        if not plan.fire:
            return 0
        try:
            current = self.jobs.get(job.tenant, job.id)
        except NotFoundError:
            reason, stopped_at = SKIP_REASON_DELETED, now
        else:
            if current.state is not JobState.PAUSED or current.paused_at is None:
                return 0  # another tick or an edit advanced it: its runs stand
            reason, stopped_at = SKIP_REASON_PAUSED, current.paused_at
        withdrawn = 0
        for occurrence in plan.fire:
            run = self.runs.find(make_run_id(job.id, occurrence.at))
            if run is not None and run.state is RunState.QUEUED and run.due_at > stopped_at:
                withdrawn += self.runs.transition(run, RunState.SKIPPED, now, reason=reason) is not None
        return withdrawn

    def _cancel(self, previous: Run, now: datetime) -> int:
        if previous.state is RunState.QUEUED:
            return int(
                self.runs.transition(previous, RunState.CANCELLED, now, reason=SKIP_REASON_REPLACED)
                is not None
            )
        if previous.state in (RunState.RUNNING, RunState.RETRYING):
            return int(self.runs.request_cancel(previous) is not None)
        return 0


def dispatcher_from_settings(
    settings: Settings,
    clients: Clients,
    *,
    meter: Meter | None = None,
    owner: str | None = None,
    clock: Clock | None = None,
) -> Dispatcher:
    """A dispatcher over the deployment's tables and queues, all calls metered by one ``meter``."""
    meter = meter or Meter()
    dynamo = dynamo_for(settings, clients.dynamodb, meter)
    limit = settings.low_backlog_limit
    backlog = LowBacklog(clients.sqs, settings.queue_url("low"), limit, meter) if limit else None
    return Dispatcher(
        JobsStore(dynamo, settings.jobs_table),
        RunsStore(dynamo, settings.runs_table, retention=timedelta(days=settings.retention_days)),
        Leases(dynamo, settings.leases_table),
        RunQueues(clients.sqs, settings.queue_urls, meter),
        lookahead=timedelta(seconds=settings.lookahead_seconds),
        enqueue_horizon=timedelta(seconds=settings.enqueue_horizon_seconds),
        owner=owner or f"dispatcher-{uuid.uuid4().hex[:12]}",
        clock=clock,
        backpressure=backlog,
    )


def _records(job: Job, plan: JobPlan, previous: Run | None, now: datetime) -> _Planned:
    """The run items ``plan`` creates for ``job``: skipped records, the summary record, the runs."""
    summary_record = None
    if plan.summary is not None:
        summary_record = skipped_run(job, plan.summary.first, plan.summary.reason, now)
        summary_record.skipped_count = plan.summary.count
        summary_record.skipped_until = plan.summary.last
    return _Planned(
        job=job,
        plan=plan,
        previous=previous,
        skipped=[skipped_run(job, at, reason, now) for at, reason in plan.skipped],
        summary_record=summary_record,
        fired=[new_run(job, o.at, o.trigger, now) for o in plan.fire],
    )


def _bookkeeping(job: Job) -> tuple:
    """The fields a job advance writes (besides ``updated_at`` and the fence)."""
    return (
        job.state,
        job.next_due_at,
        job.buffered_at,
        job.last_fired_at,
        job.last_run_id,
        job.misfire_override,
    )


def new_run(
    job: Job,
    scheduled_at: datetime,
    trigger: Trigger,
    now: datetime,
    *,
    nonce: str | None = None,
    payload_override: dict | None = None,
) -> Run:
    """A queued run of ``job`` for ``scheduled_at``; its due instant adds the job's deterministic jitter."""
    run_id = make_run_id(job.id, scheduled_at, trigger, nonce)
    return Run(
        id=run_id,
        job_id=job.id,
        tenant=job.tenant,
        trigger=trigger,
        scheduled_at=scheduled_at,
        due_at=scheduled_at + jitter_offset(run_id, job.jitter_seconds),
        priority=job.priority,
        max_attempts=job.retry.max_attempts,
        payload_override=payload_override,
        created_at=now,
    )


def skipped_run(job: Job, scheduled_at: datetime, reason: str, now: datetime) -> Run:
    """A run record of an occurrence deliberately not run (same id as the run it would have been)."""
    return Run(
        id=make_run_id(job.id, scheduled_at),
        job_id=job.id,
        tenant=job.tenant,
        state=RunState.SKIPPED,
        scheduled_at=scheduled_at,
        due_at=scheduled_at,
        priority=job.priority,
        max_attempts=job.retry.max_attempts,
        skip_reason=reason,
        created_at=now,
        finished_at=now,
    )


def outgoing_for(job: Job, run: Run, now: datetime) -> Outgoing:
    """The message for the next attempt of a queued ``run``, with the job's snapshot."""
    message = RunMessage(
        run_id=run.id,
        job_id=job.id,
        tenant=job.tenant,
        attempt=run.attempt + 1,
        scheduled_at=run.scheduled_at,
        due_at=run.due_at,
        target=job.target,
        payload=run.payload_override if run.payload_override is not None else job.payload,
        timeout_seconds=job.timeout_seconds,
        retry=job.retry,
        priority=run.priority,
    )
    return Outgoing(queue=run.priority, message=message, delay_seconds=delay_seconds(run.due_at, now))
