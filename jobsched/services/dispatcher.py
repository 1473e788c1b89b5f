"""The dispatcher service: due jobs -> runs -> queue messages, one shard per tick.

A tick of shard ``k`` of ``N`` reads the due index's partitions ``p`` with ``p % N == k``
(:func:`jobsched.core.ids.partitions_of`; a job's partition comes from its id alone, so changing
``N`` moves no item: docs/decisions/0016-due-partitions.md), gathers their due jobs and dispatches
them a page at a time. In the hour after an upgrade from a version without partitions it first re-keys
the jobs still indexed by their old shard number (:meth:`JobsStore.rekey_legacy`).

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

A due job of a tenant over its monthly budget (``budgets``, :class:`jobsched.services.budgets.BudgetGate`,
decision 0062) is held like a paused job: not planned, not advanced; each of its occurrences whose
instant arrived in the last :data:`BUDGET_LOOKBACK` is recorded ``skipped`` with reason ``budget`` (a
conditional put, so a second tick finds it). Once the tenant is under its budget again the next tick
plans the job from where it was held, with its misfire policy, and revives those records in place as
it revives a pause's (``queued``, or ``skipped``/``misfire``). The messages of a tenant that has a
budget are marked ``budgeted``: the worker checks the cap again before their first attempt, so a run
queued ahead before the tenant reached its budget is recorded ``skipped``/``budget`` too
(:meth:`jobsched.services.worker.Worker`, decision 0062 amended).
"""

from __future__ import annotations

import contextvars
import logging
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Protocol, TypeVar

from jobsched.aws.jobs_store import StaleJobError
from jobsched.aws.leases import shard_lease_key
from jobsched.core.budgets import SKIP_REASON_BUDGET
from jobsched.core.clock import Clock
from jobsched.core.dispatch_plan import DEFAULT_BATCH, SKIP_REASON_REPLACED, JobPlan, plan_job, schedule_of
from jobsched.core.edits import SKIP_REASON_RESCHEDULED, refreshed, touches_runs
from jobsched.core.errors import NotFoundError, ValidationError
from jobsched.core.ids import legacy_keys_of, partition_key, partitions_of, shard_for, validate_shard_count
from jobsched.core.messages import Outgoing
from jobsched.core.models import Job, JobState, Run, RunState, make_run_id
from jobsched.core.pools import LAMBDA_POOL
from jobsched.core.run_records import new_run, outgoing_for, skipped_run
from jobsched.core.send_timing import DEFAULT_ALIGN_BUDGET_SECONDS, DEFAULT_LATE_MARGIN_SECONDS
from jobsched.core.timeline import iter_fires
from jobsched.ports.stores import JobRecords, Lease, RunQueue, RunRecords, ShardLeases
from jobsched.services.backpressure import Backpressure, TickGate
from jobsched.services.edits import replan_ahead
from jobsched.services.send_alignment import AlignedSends

logger = logging.getLogger(__name__)
_T = TypeVar("_T")
_R = TypeVar("_R")

SKIP_REASON_PAUSED = "paused"
SKIP_REASON_DELETED = "deleted"
#: How long after its first tick of this version a shard that existed before keeps re-keying legacy
#: index entries: longer than any function of the old version can still be running (and writing them)
#: once a deployment has replaced it.
LEGACY_REKEY_WINDOW = timedelta(hours=1)
#: How far back a tick records a capped tenant's arrived occurrences skipped (reason ``budget``): two
#: tick intervals, so a tick that comes late misses none; the previous tick recorded the older ones.
BUDGET_LOOKBACK = timedelta(minutes=2)
#: At most this many budget records per job and tick (a per-second job's two minutes).
MAX_BUDGET_RECORDS = 120


class BudgetCheck(Protocol):
    """Whether a tenant is over its monthly budget (:class:`jobsched.services.budgets.BudgetGate`)."""

    def capped(self, tenant: str, now: datetime) -> bool: ...

    def has_budget(self, tenant: str, now: datetime) -> bool: ...

    def refuse_if_capped(self, tenant: str, now: datetime, operation: str) -> None: ...


@dataclass
class DispatchSummary:
    """What a tick did (returned by the function, logged, and turned into metrics)."""

    shards: list[int] = field(default_factory=list)
    partitions: list[int] = field(default_factory=list)  # due partitions the tick read
    jobs_rekeyed: int = 0  # legacy index entries moved to their partition (after an upgrade)
    fences: dict[int, int] = field(default_factory=dict)
    jobs_seen: int = 0
    jobs_advanced: int = 0
    jobs_held: int = 0
    #: due jobs left for a later tick by backpressure (jobsched/services/backpressure.py), all priorities
    jobs_held_back: int = 0
    #: due jobs held because their tenant is over its monthly budget (decision 0062)
    jobs_capped: int = 0
    jobs_stale: int = 0
    jobs_invalid: int = 0
    runs_created: int = 0
    runs_reused: int = 0
    runs_revived: int = 0  # withdrawn by a pause, decided again (queued or skipped) in place
    runs_skipped: int = 0
    #: the same runs by ``skip_reason`` (the function emits ``RunsSkipped<Reason>``); a ``Counter``, so
    #: :meth:`merge` (``update``) adds the counts of the merged tick rather than replacing them
    skipped_by_reason: Counter[str] = field(default_factory=Counter)
    runs_cancelled: int = 0
    #: queued runs given the definition of a job edited since they were sent (jobsched/services/edits.py)
    runs_refreshed: int = 0
    messages_sent: int = 0
    send_failures: int = 0
    #: seconds the tick slept to align its sends to the second (decision 0032), and how many times
    send_align_seconds: float = 0.0
    send_align_waits: int = 0
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

    def to_dict(self) -> dict[str, Any]:
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


@dataclass(frozen=True)
class DispatcherConfig:
    """A dispatcher's tunables (:func:`jobsched.compose.pipeline.dispatcher_from_settings` reads them
    from the settings)."""

    #: How far ahead of its due instant a job is read from the due index and planned.
    lookahead: timedelta
    #: The lease owner of the shards it ticks (unique per dispatcher).
    owner: str
    #: The deployment's shard count (the default of :meth:`Dispatcher.dispatch_shard`).
    shards: int = 1
    #: How far ahead runs are created and queued with ``DelaySeconds`` (never less than ``lookahead``;
    #: None: the lookahead).
    enqueue_horizon: timedelta | None = None
    #: Due jobs read and dispatched together.
    page_size: int = 100
    max_fires_per_job: int = 500
    lease_ttl: timedelta = timedelta(seconds=60)
    #: Occurrences a job fires per plan (:data:`jobsched.core.dispatch_plan.DEFAULT_BATCH`).
    batch: int = DEFAULT_BATCH
    #: Jobs of a page whose writes run at once (their runs' puts; then their advances): each call
    #: waits on the network, so a tick's throughput grows with it (docs/scaling.md).
    concurrency: int = 1
    #: Aligning a tick's sends to the second (decision 0032); a margin of 0 turns it off (delays rounded
    #: down, as the API's dispatch at creation does).
    send_late_margin: float = DEFAULT_LATE_MARGIN_SECONDS
    align_budget: float = DEFAULT_ALIGN_BUDGET_SECONDS
    #: Whether a dispatch reads the clock after the page's writes: to re-check the shard lease (a tick
    #: that overran it must stop) and to count each batch's delays from when it is sent
    #: (:meth:`Dispatcher.timed_sends`). False: both from the dispatch's ``now``, and no alignment:
    #: the API's immediate dispatch of a created job, and tests that pass every instant by hand.
    reads_clock: bool = True

    def __post_init__(self) -> None:
        validate_shard_count(self.shards)

    @property
    def horizon(self) -> timedelta:
        """The enqueue horizon, never shorter than the lookahead."""
        return max(self.lookahead, self.enqueue_horizon or self.lookahead)


class Dispatcher:
    """Performs :func:`jobsched.core.dispatch_plan.plan_job` for the due jobs of a shard.

    Tunables come in ``config``; the stores, the run queues, the clock and the tick's sleep are its
    ports (``sleep`` None: a dispatcher that never aligns its sends, the API's).
    """

    def __init__(
        self,
        jobs: JobRecords,
        runs: RunRecords,
        leases: ShardLeases,
        queues: RunQueue,
        *,
        config: DispatcherConfig,
        clock: Clock,
        backpressure: Backpressure | None = None,
        sleep: Callable[[float], Any] | None = None,
        budgets: BudgetCheck | None = None,
    ):
        self.jobs = jobs
        self.runs = runs
        self.leases = leases
        self.queues = queues
        self.config = config
        self.clock = clock
        self.backpressure = backpressure
        #: What a tick sleeps on to align its sends to the second (one that moves the clock in tests).
        self.sleep = sleep
        #: Tenants over their monthly budget (None: no spend caps).
        self.budgets = budgets

    @property
    def lookahead(self) -> timedelta:
        return self.config.lookahead

    @property
    def horizon(self) -> timedelta:
        return self.config.horizon

    @property
    def shards(self) -> int:
        return self.config.shards

    @property
    def concurrency(self) -> int:
        return max(1, self.config.concurrency)

    def aligned_sends(self) -> AlignedSends | None:
        """A tick's aligned sending (:mod:`jobsched.services.send_alignment`), or None when this
        dispatcher does not read its clock, has no sleep to align with, or a margin of 0."""
        config = self.config
        if not config.reads_clock or self.sleep is None or config.send_late_margin <= 0:
            return None
        return AlignedSends(
            clock=self.clock,
            sleep=self.sleep,
            late_margin=config.send_late_margin,
            budget=config.align_budget,
            concurrency=self.concurrency,
            each=self._each,
        )

    def timed_sends(self) -> AlignedSends | None:
        """Sending without alignment: no wait, each batch's delays rounded down from the clock read
        just before its ``SendMessageBatch``, not from the tick's (or the request's) ``now``: the
        page's puts before the send take time, and a delay counted from before them surfaced every
        run that much late (seconds, under the embedded mode's load; issue 12 §6). None for a
        dispatcher that does not read its clock (the delays are then rounded down from ``now``)."""
        if not self.config.reads_clock:
            return None
        return AlignedSends(
            clock=self.clock,
            sleep=_no_sleep,
            late_margin=0.0,
            budget=0.0,
            concurrency=self.concurrency,
            each=self._each,
        )

    def shard_of(self, job_id: str) -> int:
        """The shard that owns ``job_id`` under this deployment's shard count."""
        return shard_for(job_id, self.shards)

    def dispatch_shard(self, shard: int, now: datetime, shards: int | None = None) -> DispatchSummary:
        """One tick of shard ``shard`` of ``shards`` (default: the deployment's count): take its lease,
        gather the due jobs of its partitions, dispatch them a page at a time.

        The tick event names the count (``{"shard": k, "shards": n}``), so while a deployment changes it,
        each schedule's ticks follow the mapping of that schedule: a partition may briefly be read by
        two shards (the conditional run put and job advance keep one run per occurrence), and is never
        left to none once the deployment is done.
        """
        count = validate_shard_count(shards if shards is not None else self.shards)
        partitions = partitions_of(shard, count)
        summary = DispatchSummary(shards=[shard], partitions=partitions)
        lease = self.leases.acquire(
            shard_lease_key(shard),
            self.config.owner,
            now,
            self.config.lease_ttl,
            legacy_window=LEGACY_REKEY_WINDOW,
        )
        summary.fences[shard] = lease.token
        gate = self.backpressure.tick(now) if self.backpressure and self.backpressure.active else None
        sends = self.aligned_sends()
        try:
            if lease.in_legacy_window(now):
                summary.jobs_rekeyed = sum(self.jobs.rekey_legacy(k) for k in legacy_keys_of(shard, count))
            page: list[tuple[str, str]] = []
            for partition in partitions:
                start = None
                while True:
                    keys, start = self.jobs.due_keys(
                        partition_key(partition),
                        now + self.lookahead,
                        limit=self.config.page_size,
                        start_key=start,
                    )
                    page.extend(keys)
                    if len(page) >= self.config.page_size:
                        summary.merge(self._dispatch_keys(page, now, lease, gate, sends))
                        page = []
                    if not start:
                        break
            if page:
                summary.merge(self._dispatch_keys(page, now, lease, gate, sends))
            if sends is not None:
                summary.send_align_seconds, summary.send_align_waits = round(sends.slept, 6), sends.waits
            if gate is not None:
                gate.log(shard)
        finally:
            # Every write above is idempotent, so handing the shard on early is safe even after an
            # error; a process that dies here instead simply lets the lease expire.
            self.leases.release(lease, now)
        return summary

    def _dispatch_keys(
        self,
        keys: list[tuple[str, str]],
        now: datetime,
        lease: Lease,
        gate: TickGate | None,
        sends: AlignedSends | None,
    ) -> DispatchSummary:
        return self.dispatch_jobs(self.jobs.get_many(keys), now, lease=lease, gate=gate, sends=sends)

    def dispatch_jobs(
        self,
        jobs: list[Job],
        now: datetime,
        *,
        lease: Lease | None = None,
        gate: TickGate | None = None,
        sends: AlignedSends | None = None,
    ) -> DispatchSummary:
        """Dispatch the given jobs (a page of a shard, or one job the API just created).

        With a ``lease`` the lease is re-checked before any job is advanced and its token fences every
        advance; without one (the API's immediate dispatch) only the job's own conditions protect it.
        A ``gate`` (the tick's backpressure) may hold due ``default``/``low`` jobs of the ``lambda``
        pool back, untouched.
        With ``sends`` (a tick's :class:`AlignedSends`) the messages are sent aligned to the second;
        without, with each batch's delays rounded down from the clock when it is sent
        (:meth:`timed_sends`; from ``now`` for a dispatcher that does not read its clock).
        """
        summary = DispatchSummary(jobs_seen=len(jobs))
        planned: list[_Planned] = []
        capped: list[Run] = []
        for job in jobs:
            due = [t for t in (job.next_due_at, job.buffered_at) if t is not None]
            if not due or min(due) > now + self.lookahead:
                # The index (eventually consistent) lagged behind an advance: nothing is due, write nothing.
                summary.jobs_held += 1
                continue
            if self.budgets is not None and self.budgets.capped(job.tenant, now):
                summary.jobs_capped += 1
                capped.extend(_budget_records(job, now))
                continue
            # Backpressure watches the Lambda priority queues: a long or container job is never held.
            if gate is not None and (job.pool or LAMBDA_POOL) == LAMBDA_POOL and gate.holds(job.priority):
                summary.jobs_held_back += 1
                continue
            previous = self._previous(job)
            try:
                plan = plan_job(
                    job,
                    now,
                    self.horizon,
                    previous,
                    max_fires=self.config.max_fires_per_job,
                    lookahead=self.lookahead,
                    batch=self.config.batch,
                )
            except ValidationError as exc:
                summary.jobs_invalid += 1
                logger.warning("job %s has an invalid schedule, not dispatched: %s", job.id, exc.message)
                continue
            if plan.hold:
                summary.jobs_held += 1
                continue
            planned.append(_records(job, plan, previous, now))
        self.runs.announce([*capped, *(run for p in planned for run in p.records)])
        for record in capped:
            created = self.runs.put_announced(record)[1]
            summary.runs_skipped += created
            summary.skipped_by_reason[SKIP_REASON_BUDGET] += created
        work: list[_Work] = []
        outgoing: list[Outgoing] = []

        def perform(p: _Planned) -> tuple[list[Outgoing], DispatchSummary]:
            own = DispatchSummary()
            return self._perform(p, now, own), own

        for p, (messages, own) in zip(planned, self._each(perform, planned), strict=True):
            summary.merge(own)
            outgoing.extend(messages)
            work.append(_Work(p.job, p.plan, [m.key for m in messages]))
        if self.budgets is not None:  # the worker checks the cap before these runs' first attempt
            outgoing = [_budgeted(o) if self.budgeted(o.message.tenant, now) else o for o in outgoing]
        sends = sends if sends is not None else self.timed_sends()
        report = sends.send(self.queues, outgoing) if sends is not None else self.queues.send(outgoing)
        summary.messages_sent += len(report.sent)
        summary.send_failures += len(report.failed)
        if lease is not None and work:  # nothing to advance, nothing to fence: no read
            self.leases.check(lease, self.clock.now() if self.config.reads_clock else now)

        def advance(item: _Work) -> DispatchSummary:
            own = DispatchSummary()
            if any(key in report.failed for key in item.keys):
                return own
            if _bookkeeping(item.job) == _bookkeeping(item.plan.job):
                own.jobs_held += 1  # e.g. a buffered occurrence still waiting: no write needed
                return own
            try:
                self.jobs.advance(
                    item.job,
                    item.plan.job,
                    lease.token if lease else None,
                    fence_lease=lease.key if lease else None,
                )
            except StaleJobError as exc:
                own.jobs_stale += 1
                logger.info("job %s not advanced: %s", item.job.id, exc.message)
                own.runs_skipped += self._withdraw_if_stopped(item.job, item.plan, now, item.keys, own)
                return own
            own.jobs_advanced += 1
            return own

        for own in self._each(advance, work):
            summary.merge(own)
        return summary

    def budgeted(self, tenant: str, now: datetime) -> bool:
        """Whether ``tenant`` has a monthly budget (the gate's cached answer): its run messages are
        then marked for the worker's spend-cap check before a first attempt (decision 0062)."""
        return self.budgets is not None and self.budgets.has_budget(tenant, now)

    def _each(self, step: Callable[[_T], _R], items: list[_T]) -> list[_R]:
        """``step`` of every item, in order; up to :attr:`concurrency` at once. Each item is one job:
        its own writes stay in their order (runs before the send, the send before the advance), and
        jobs are independent of one another. An error in any step is raised after all have ended."""
        if self.concurrency == 1 or len(items) < 2:
            return [step(item) for item in items]
        with ThreadPoolExecutor(max_workers=min(self.concurrency, len(items))) as pool:
            # Each thread runs in a copy of this context: its log lines carry the tick's keys.
            futures = [pool.submit(contextvars.copy_context().run, step, item) for item in items]
            wait(futures)
        return [future.result() for future in futures]

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
            stored, created, revived = self._put(record)
            summary.runs_skipped += created or revived
            summary.skipped_by_reason[record.skip_reason or "other"] += created or revived
            summary.runs_revived += revived
            if not (created or revived) and stored.state is RunState.QUEUED:
                fresh = self._fresh(job, stored)  # created by a crashed tick: finish it
                if fresh is not None:
                    outgoing.append(outgoing_for(job, fresh, now))
        if planned.summary_record is not None and plan.summary is not None:
            _, created, revived = self._put(planned.summary_record)
            summary.runs_skipped += plan.summary.count if created or revived else 0
            summary.skipped_by_reason[plan.summary.reason] += plan.summary.count if created or revived else 0
            summary.runs_revived += revived
        last_run_id = job.last_run_id
        for run in planned.fired:
            stored, created, revived = self._put(run)
            summary.runs_created += created
            summary.runs_revived += revived
            summary.runs_reused += not (created or revived)
            if stored.state is RunState.QUEUED:
                fresh = stored if created or revived else self._fresh(job, stored)
                if fresh is not None:
                    outgoing.append(outgoing_for(job, fresh, now))
            last_run_id = stored.id
        if plan.cancel_previous and planned.previous is not None:
            summary.runs_cancelled += self._cancel(planned.previous, now)
        plan.job.last_run_id = last_run_id
        return outgoing

    def _put(self, record: Run) -> tuple[Run, bool, bool]:
        """Put a planned run or skipped record (already in the feed): ``(stored, created, revived)``.

        An occurrence a pause withdrew (skipped, reason ``paused``) and that this plan decides again —
        the job was resumed, or rewound by the pause — is *revived*: its record is replaced by the
        planned one with a conditional write, so it stays one item. Any other stored item is
        returned as it is (neither created nor revived).
        """
        stored, created = self.runs.put_announced(record)
        if created:
            return stored, True, False
        stored, revived = self.runs.revive(record, stored, SKIP_REASON_PAUSED)
        if not revived:  # an occurrence held while its tenant was over its budget, decided now
            stored, revived = self.runs.revive(record, stored, SKIP_REASON_BUDGET)
        return stored, False, revived

    def _withdraw_if_stopped(
        self, job: Job, plan: JobPlan, now: datetime, sent: list[str], summary: DispatchSummary
    ) -> int:
        """Withdraw the plan's runs queued ahead of a pause or delete that happened since ``job`` was read.

        The pause withdraws the queued-ahead runs it finds; runs this tick created after that would
        escape it and run while the job is paused. Their advance was refused, so here the ones still
        queued and due after the pause (or this tick, for a deleted job) are recorded skipped as the
        pause would have; their messages then run nothing. Returns how many were withdrawn (skipped).

        An edit since the read that touches what runs carry or when they are: the runs this tick sent
        messages for (``sent``: message keys) were queued from the job before the edit, and the edit's
        own re-planning may have listed the runs before this tick put them. They are re-planned here
        as the edit would have (:func:`jobsched.services.edits.replan_ahead`; the job version on each
        run makes whichever of the two writers comes second do nothing).
        """
        if not plan.fire and not sent:
            return 0
        try:
            current = self.jobs.get(job.tenant, job.id)
        except NotFoundError:
            reason, stopped_at = SKIP_REASON_DELETED, now
        else:
            if current.state is not JobState.PAUSED and touches_runs(job, current):
                return self._replan_sent(job, current, sent, now, summary)
            if current.state is not JobState.PAUSED or current.paused_at is None:
                return 0  # another tick advanced it: its runs stand
            reason, stopped_at = SKIP_REASON_PAUSED, current.paused_at
        withdrawn = 0
        for occurrence in plan.fire:
            run = self.runs.find(make_run_id(job.id, occurrence.at))
            if run is not None and run.state is RunState.QUEUED and run.due_at > stopped_at:
                withdrawn += self.runs.transition(run, RunState.SKIPPED, now, reason=reason) is not None
        summary.skipped_by_reason[reason] += withdrawn
        return withdrawn

    def _replan_sent(
        self, read: Job, current: Job, sent: list[str], now: datetime, summary: DispatchSummary
    ) -> int:
        """Re-plan the runs this tick sent from ``read`` for the edit that made ``current``; returns
        how many were rescheduled (skipped)."""
        found = (self.runs.find(key.rpartition("@")[0]) for key in dict.fromkeys(sent))
        queued = [run for run in found if run is not None and run.state is RunState.QUEUED]
        done = replan_ahead(
            self.runs, self.queues, read, current, queued, now, budgeted=self.budgeted(read.tenant, now)
        )
        summary.runs_refreshed += len(done.refreshed)
        summary.skipped_by_reason[SKIP_REASON_RESCHEDULED] += len(done.rescheduled)
        return len(done.rescheduled)

    def _fresh(self, job: Job, stored: Run) -> Run | None:
        """The stored queued run to send ``job``'s message for, when this tick did not create or revive
        it (a crashed tick's run, or a racing writer's): as it is when it was queued under the same
        job version; refreshed first (:meth:`RunsStore.refresh`) when under an older one, so the message
        it was sent with then is stale; None when a newer version queued it (this tick read the job
        before an edit: that edit's writer sent its message) or another writer refreshed it first."""
        version = stored.job_version or 0
        if version == job.version:
            return stored
        if version > job.version:
            return None
        return self.runs.refresh(stored, refreshed(stored, job), job.version)

    def _cancel(self, previous: Run, now: datetime) -> int:
        if previous.state is RunState.QUEUED:
            return int(
                self.runs.transition(previous, RunState.CANCELLED, now, reason=SKIP_REASON_REPLACED)
                is not None
            )
        if previous.state in (RunState.RUNNING, RunState.RETRYING):
            return int(self.runs.request_cancel(previous) is not None)
        return 0


def _no_sleep(seconds: float) -> None:
    """The sleep of :meth:`Dispatcher.timed_sends`, whose budget of 0 never waits."""
    raise AssertionError(f"timed sends never wait (asked {seconds} s)")


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


def _budget_records(job: Job, now: datetime) -> list[Run]:
    """The ``skipped``/``budget`` records of ``job``'s occurrences that arrived in the last
    :data:`BUDGET_LOOKBACK` (none before its cursor, none after ``now``), newest
    :data:`MAX_BUDGET_RECORDS` of them."""
    cursor = job.next_due_at
    if job.state is not JobState.ACTIVE or cursor is None or cursor > now:
        return []
    after = max(cursor - timedelta(milliseconds=1), now - BUDGET_LOOKBACK)
    try:
        fires = iter_fires(schedule_of(job), after)
    except ValidationError:
        return []  # an invalid stored schedule: the plan reports it once the tenant is under budget
    instants: list[datetime] = []
    for fire in fires:  # real fires only (a DST-skipped instant is recorded dst_gap by the plan)
        if fire.at > now:
            break
        instants.append(fire.at)
    return [skipped_run(job, at, SKIP_REASON_BUDGET, now) for at in instants[-MAX_BUDGET_RECORDS:]]


def _budgeted(outgoing: Outgoing) -> Outgoing:
    """``outgoing`` with its message marked ``budgeted`` (its tenant has a monthly budget)."""
    return replace(outgoing, message=replace(outgoing.message, budgeted=True))


def _bookkeeping(job: Job) -> tuple[object, ...]:
    """The fields a job advance writes (besides ``updated_at`` and the fence)."""
    return (
        job.state,
        job.next_due_at,
        job.buffered_at,
        job.last_fired_at,
        job.last_run_id,
        job.misfire_override,
    )
