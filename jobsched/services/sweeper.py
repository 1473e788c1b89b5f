"""The sweeper: finds runs that nothing will move on, hands them to a worker again, and ends those it
gives up on (guarantee 4: every run ends).

**Reach.** The sweeper reads the in-flight ledger (:mod:`jobsched.core.inflight`): every write that
puts runs in ``queued`` (a dispatcher page, a trigger, a backfill, a revive after a pause, a replay or
retry of a dead letter) names them in a ledger item, in the same batched write as the tenant run
feed. A sweep queries the ledger's partitions, reads the runs the items name (together, grouped by
job: :func:`jobsched.aws.run_reads.read_runs`), and deletes an item once none of its runs is active
any more (and it is older than ``grace``). An item whose
earliest run is not due yet (``due_from`` later than ``grace`` ago) is passed over unread. So every run
in flight is in reach whatever its scheduled instant (a backfill's runs are scheduled in the past),
its tenant (one with no job left included) or its age; no job is read unless one of its runs is
stranded, and a registered job that has no run in flight costs the sweep nothing.

**Stranded**, judged from the run's own timestamps (:func:`jobsched.core.sweeping.stranded_kind`):

- *lost send* — ``queued`` and ``due_at`` more than ``grace`` ago;
- *lost retry* — ``retrying`` and ``retry_at`` more than ``grace`` ago;
- *expired lease* — ``running`` and ``lease_until`` more than ``grace`` ago;
- *stranded replay* — ``replay_pending_at`` more than ``grace`` ago: a replay (or retry) of a failed
  run moved it to ``queued`` and died before sending its message or before its last write
  (:mod:`jobsched.services.runs`). Still ``queued`` at the attempt before the one in
  ``replay_message``: that exact message is re-sent; then the replay's last write is done.

**Rescue.** For the first three, the sweeper marks the run (``swept_at``, ``sweeps + 1``, conditional
on the state and attempt it read, so two sweepers never both act) and sends the message of the next
attempt from the job's definition, with the run's current ``send_token``: a copy of the send it
believes lost (if the first copy turns up after all, whichever arrives first runs the attempt and the
other finds it taken). A run whose job is gone ends ``failed`` (reason
``lost``). A run is re-sent at most ``max_sweeps`` times, each at least ``grace`` after the last.

**Giving up.** Still stranded after ``max_sweeps`` re-sends, a run is declared *stranded*: it ends
``failed`` with ``dl_reason = stranded`` in the dead letters (with the message it would have been
sent, so it is replayable like any other), counted in ``RunsDeadLettered`` and ``RunsStranded``.
Unless its queue holds a backlog (``ApproximateNumberOfMessages`` > 0, or unreadable): then its
message may only be waiting its turn, the declaration is deferred to a later sweep (``deferred``).

**Owed notifications.** A run the sweeper reads that is a dead letter whose notification is still
owed (``notify_pending`` more than ``grace`` ago: a sender that died, a try that failed, a poison
dead letter the DLQ consumer only marked, the sweeper's own ``lost``/``stranded`` dead letters) is
handed to the notifier (:mod:`jobsched.services.notifications`), which claims it with a conditional
write, so a sweep racing the worker's own delivery sends nothing twice. A ledger item is kept while
one of its runs owes a notification, so the run stays in reach until it is paid.

**The age of the oldest queued run.** Of the runs it reads, the sweep notes per queue the earliest due
instant of a run still ``queued`` (past due, not waiting for a limit: its message is in the queue,
ready); a run of the ``long`` or ``container`` pool counts for its pool's queue, never for its
priority's (``queue_for(pool, priority)``), so a backlog there holds back no Lambda priority. It writes
the ``default`` and ``low`` ones for the dispatcher's backpressure by age
(:mod:`jobsched.aws.queue_ages`, decision 0028) and emits, for every priority, the seconds since then (0
when there is none) as the metric ``OldestQueuedRunAge<Priority>``: what the ``OldestRun-<priority>``
alarms watch, since SQS's ``ApproximateAgeOfOldestMessage`` counts the time a message sent ahead with
``DelaySeconds`` waits for its due instant (decision 0040).

**Run statistics.** The ended runs of the ledger items a sweep deletes (settled, or dropped from a
compacted item) are counted per tenant and minute of their due instant (:mod:`jobsched.core.run_stats`,
decision 0061): one ``UpdateItem`` per (tenant, minute) at the end of the sweep, only by the sweep
whose ``DeleteItem`` returned the item (two sweeps never both count it). A run the sweep itself ended
(stranded, or its job gone) counts as failed and dead-lettered (at the sweep's instant). A dead
letter is also counted in the minute it was dead-lettered (``dl_at``), as ``dead_letters`` (decision
0064).

**Queue depth.** Each sweep samples every run queue's approximate counts (visible, in flight, delayed:
one ``GetQueueAttributes`` per queue) into one item of its minute (:mod:`jobsched.aws.queue_depths`,
decision 0064), what ``GET /stats/queues`` reads; a failed sample is logged, the sweep goes on.

Cost: per sweep, one Query per ledger partition (0.5 RRU each when empty) plus the unsettled ledger
items' size; the runs named, for every sweep that finds their item due and still in flight (usually
one: the dispatcher's runs queued ahead are named by one item per two minutes of due instants,
:func:`jobsched.core.inflight.due_groups`, so when an item ripens its runs have all been due for a
while and most have ended), read by one Query per job over their keys, billed by their total size
(0.5 RRU per 4 KB: a per-minute job's five runs of a sweep period share it), or by key (0.5 RRU
each) for a job with one run to read;
DeleteItem of a settled item (its size in WRU, shared by its runs). Writes only for stranded runs,
and for a big item (50 runs or more) of which at most a quarter is still in flight: it is rewritten
with only those (``compacted``: the small item's size in WRU, once), so later sweeps, and listings by
an active state (docs/decisions/0021), read the runs in flight, not the whole batch again.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from jobsched.aws.attempts import NOTIFY_PENDING, REPLAY_MESSAGE, REPLAY_PENDING
from jobsched.aws.metering import ConditionFailed
from jobsched.aws.queue_ages import QueueAges
from jobsched.aws.queues import QueueReadError
from jobsched.aws.run_reads import read_runs
from jobsched.core.errors import ConflictError, NotFoundError
from jobsched.core.feed import entry_key
from jobsched.core.inflight import compacted, partitions, unripe, written_at
from jobsched.core.instants import from_iso
from jobsched.core.messages import RunMessage
from jobsched.core.models import ACTIVE_RUN_STATES, Job, Run, RunState, tenant_sort_for, to_iso
from jobsched.core.pools import CONTAINER_QUEUE, LONG_QUEUE, POOLS, queue_for
from jobsched.core.run_records import outgoing_for
from jobsched.core.run_stats import tally
from jobsched.core.sweeping import Rescue, stranded_kind
from jobsched.ports.stores import AttemptRecords, JobRecords, RunQueue
from jobsched.ports.tables import Table
from jobsched.runtime import observability as obs
from jobsched.runtime.resources import BACKPRESSURE_PRIORITIES, DEFAULT_SWEEPER_GRACE_SECONDS, PRIORITIES
from jobsched.services.deadlines import DeadlineWatch
from jobsched.services.notifications import DeadLetterNotifier
from jobsched.services.runs import finish_replay

logger = logging.getLogger(__name__)

#: The queues whose oldest queued run the sweep records for others to read: the priorities backpressure
#: holds back by age (decision 0028) and the long and container pools' queues the capacity service
#: raises on age (decision 0055). ``high`` is not: it is never held back, and its ceiling is its reservation.
AGED_QUEUES = (*BACKPRESSURE_PRIORITIES, LONG_QUEUE, CONTAINER_QUEUE)

DEFAULT_GRACE = timedelta(seconds=DEFAULT_SWEEPER_GRACE_SECONDS)  # 2 minutes
DEFAULT_MAX_SWEEPS = 3
#: Ripe ledger items are read together until they name this many runs (what one read holds in memory:
#: about 500 bytes a run).
READ_CHUNK_RUNS = 5000
STRANDED = "stranded"
_ACTIVE = {str(s) for s in ACTIVE_RUN_STATES}


@dataclass
class SweepSummary:
    ledger_items: int = 0  # ledger items read
    settled: int = 0  # ledger items deleted: none of their runs is active any more
    runs_examined: int = 0  # active runs read
    resent: int = 0  # lost sends and lost retries
    reclaimed: int = 0  # expired leases
    stranded: int = 0  # given up after max_sweeps re-sends: failed, reason stranded
    deferred: int = 0  # would be declared stranded, but the run's queue holds a backlog
    failed: int = 0  # the job is gone: the run is failed (reason lost)
    replays_resent: int = 0  # stranded replays whose message was re-sent
    replays_cleaned: int = 0  # replays whose run had moved on: only the pending marker removed
    notifications: int = 0  # owed dead-letter notifications handed to the notifier
    compacted: int = 0  # big ledger items rewritten with only their runs still in flight
    deadlines_missed: int = 0  # runs found past their deadline and reported (decision 0058)
    occurrences_missed: int = 0  # occurrences with no run found past their deadline and reported
    stats_written: int = 0  # run statistics items added to: one per (tenant, minute) of runs settled
    depths_sampled: int = 0  # run queues whose depth this sweep sampled (decision 0064)

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


@dataclass(frozen=True)
class SweeperConfig:
    """A sweeper's tunables (:func:`jobsched.compose.pipeline.sweeper_from_settings` builds them)."""

    #: The Runs table: its ledger partitions are read, its items rescued (through ``dynamo``).
    runs_table: str
    #: How long past its due instant (retry, lease) a run waits before the sweeper acts on it, and
    #: between two of its re-sends.
    grace: timedelta = DEFAULT_GRACE
    #: Re-sends of a stranded run before it is declared stranded (failed, in the dead letters).
    max_sweeps: int = DEFAULT_MAX_SWEEPS


class Sweeper:
    """One sweep over the runs in flight: tunables in ``config``, the stores, the run queues and the
    metrics injected. It reads no clock: each sweep is given its ``now``."""

    def __init__(
        self,
        *,
        config: SweeperConfig,
        dynamo: Table,
        jobs: JobRecords,
        attempts: AttemptRecords,
        queues: RunQueue,
        metrics: obs.MetricSink | None = None,
        notifier: DeadLetterNotifier | None = None,
        workflows: WorkflowHooks | None = None,
        ages: QueueAges | None = None,
        deadlines: DeadlineWatch | None = None,
        stats: RunStats | None = None,
        depths: DepthSampler | None = None,
    ):
        self.config = config
        self.dynamo = dynamo
        self.runs_table = config.runs_table
        self.jobs = jobs
        self.attempts = attempts
        self.queues = queues
        self.metrics = metrics or obs.NullSink()
        self.grace = config.grace
        self.max_sweeps = config.max_sweeps
        #: Delivers owed dead-letter notifications; None: they are left to another sweeper.
        self.notifier = notifier
        #: DAG workflows (:class:`jobsched.services.workflows.WorkflowEngine`): a started workflow run is
        #: advanced (never re-sent), a node run's re-send is the node's message. None: no workflows.
        self.workflows = workflows
        #: Where the sweep records the oldest queued run per priority (backpressure by age,
        #: :mod:`jobsched.services.backpressure`); None: not recorded.
        self.ages = ages
        #: Reports missed deadlines (:mod:`jobsched.services.deadlines`); None: not checked.
        self.deadlines = deadlines
        #: Where the runs of the ledger items a sweep settles are counted per tenant and minute
        #: (decision 0061, ``GET /stats``); None: not counted.
        self.stats = stats
        #: Where each sweep keeps a sample of every run queue's depth (decision 0064, ``GET
        #: /stats/queues``); None: not sampled.
        self.depths = depths

    def sweep(self, now: datetime) -> SweepSummary:
        """Examine every run the in-flight ledger names; rescue or end the stranded ones."""
        summary = SweepSummary()
        sweep = _Sweep(now)
        if self.deadlines is not None:
            self.deadlines.reset()
        ripe: list[dict[str, Any]] = []
        named = 0
        for partition in partitions():
            for item in self.dynamo.query_all(self.runs_table, "job_id = :p", {":p": partition}):
                summary.ledger_items += 1
                if unripe(item, now - self.grace):
                    continue  # its runs are not due yet: nothing to read
                ripe.append(item)
                named += len(item.get("runs", []))
                if named >= READ_CHUNK_RUNS:
                    self._sweep_items(ripe, sweep, summary)
                    ripe, named = [], 0
        if ripe:
            self._sweep_items(ripe, sweep, summary)
        if self.deadlines is not None:
            self.deadlines.check_occurrences(now)
            summary.deadlines_missed = self.deadlines.summary.runs_missed
            summary.occurrences_missed = self.deadlines.summary.occurrences_missed
        for priority in PRIORITIES:  # the OldestRun-<priority> alarms (docs/decisions/0040)
            self.metrics.add(obs.oldest_queued_run_age(priority), sweep.oldest_queued_age(priority))
        if self.ages is not None:
            self.ages.record({q: due for q, due in sweep.oldest_queued.items() if q in AGED_QUEUES}, now)
        if self.stats is not None and sweep.settled_runs:
            try:
                summary.stats_written = self.stats.add(tally(sweep.settled_runs.values()))
            except Exception:  # statistics are a view: a failed add must not fail the sweep
                logger.exception("could not add the run statistics of %d runs", len(sweep.settled_runs))
        if self.depths is not None:
            try:
                summary.depths_sampled = self.depths.sample(now)
            except Exception:  # a view, as the statistics: a failed sample must not fail the sweep
                logger.exception("could not write the queue depth sample")
        return summary

    # --- ledger items ----------------------------------------------------------------------------

    def _sweep_items(self, ledgers: list[dict[str, Any]], sweep: _Sweep, summary: SweepSummary) -> None:
        """Read the runs ``ledgers`` name together (grouped by job, :func:`read_runs`: a job's runs
        named by several items share a Query), then settle each item."""
        keys = [
            k
            for ledger in ledgers
            for k in map(entry_key, ledger.get("runs", []))
            if (k["job_id"], k["run_key"]) not in sweep.seen
        ]
        runs = read_runs(self.dynamo, self.runs_table, keys)  # (duplicates read once)
        for ledger in ledgers:
            self._sweep_item(ledger, runs, sweep, summary)

    def _sweep_item(
        self,
        ledger: dict[str, Any],
        runs: Mapping[tuple[str, str], dict[str, Any]],
        sweep: _Sweep,
        summary: SweepSummary,
    ) -> None:
        in_flight = False
        still: dict[str, str] = {}  # entry -> tenant of the runs still in flight
        for entry in ledger.get("runs", []):
            k = entry_key(entry)
            key = (k["job_id"], k["run_key"])
            if key not in sweep.seen:  # a run named by several items is examined once per sweep
                item = runs.get(key)
                if item is None:
                    continue  # never put (a crash between the ledger write and the put)
                active = self._examine(item, sweep, summary)
                sweep.seen[key] = (active, item.get("tenant", ""))
                if not active:
                    sweep.ended[key] = _ended(item, sweep.now, key in sweep.dead_lettered)
            active, tenant = sweep.seen[key]
            in_flight = in_flight or active
            if active:
                still[tenant_sort_for(key[1], key[0])] = tenant
        if written_at(ledger["run_key"]) > sweep.now - self.grace:
            return  # a young item's runs may not be put yet
        if in_flight:
            self._compact(ledger, still, summary, sweep)
            return
        if self.dynamo.delete(self.runs_table, {"job_id": ledger["job_id"], "run_key": ledger["run_key"]}):
            sweep.settle(ledger)  # this sweep deleted it (None: another did): its runs are counted here
        summary.settled += 1

    def _compact(
        self, ledger: dict[str, Any], still: dict[str, str], summary: SweepSummary, sweep: _Sweep
    ) -> None:
        """Rewrite a big ledger item most of whose runs ended with only those still in flight
        (:func:`jobsched.core.inflight.compacted`): the new item first, then the old one deleted (a
        crash between leaves both, naming the same runs: harmless)."""
        smaller = compacted(ledger, still, still.values(), lambda: secrets.token_urlsafe(8))
        if smaller is None:
            return
        self.dynamo.put(self.runs_table, smaller)
        if self.dynamo.delete(self.runs_table, {"job_id": ledger["job_id"], "run_key": ledger["run_key"]}):
            sweep.settle(ledger)  # the ended runs it named leave the ledger: counted now
        summary.compacted += 1

    def _examine(self, item: dict[str, Any], sweep: _Sweep, summary: SweepSummary) -> bool:
        """Rescue ``item`` if it is stranded; whether the run is still active after."""
        now = sweep.now
        active = item.get("state") in _ACTIVE
        pending = item.get(REPLAY_PENDING)
        if pending:  # a replay in progress: its own steps, or the sweeper's after the grace period
            if pending < to_iso(now - self.grace):
                self._finish_replay(item, now, summary)
            return active
        owed = self._deadline(item, sweep)
        if not active:
            return self._owed_notification(item, now, summary) or owed
        summary.runs_examined += 1
        if self.workflows is not None and self.workflows.owns(item):
            return self.workflows.sweep(item, now, self.grace)
        sweep.note_queued(item)
        kind = stranded_kind(item, now, self.grace)
        if kind is None:
            return True
        run = Run.from_item(item)
        if run.job_id not in sweep.jobs:
            sweep.jobs[run.job_id] = self._job(run.tenant, run.job_id)
        return self._rescue(item, run, kind, sweep.jobs[run.job_id], sweep, summary)

    def _deadline(self, item: dict[str, Any], sweep: _Sweep) -> bool:
        """Report the run if it missed its deadline; whether a report is still owed."""
        if self.deadlines is None:
            return False
        return self.deadlines.check_run(
            item, sweep.now, lambda tenant, job_id: self._cached_job(sweep, tenant, job_id)
        )

    def _cached_job(self, sweep: _Sweep, tenant: str, job_id: str) -> Job | None:
        if job_id not in sweep.jobs:
            sweep.jobs[job_id] = self._job(tenant, job_id)
        return sweep.jobs[job_id]

    def _owed_notification(self, item: dict[str, Any], now: datetime, summary: SweepSummary) -> bool:
        """Hand a dead letter's owed notification to the notifier once its grace has passed; whether
        it is still owed after (its ledger item is kept until it is not)."""
        pending = item.get(NOTIFY_PENDING)
        if not pending:
            return False
        if self.notifier is None or pending >= to_iso(now - self.grace):
            return True
        summary.notifications += 1
        return self.notifier.deliver(item, now) in ("retrying", "skipped")

    def _job(self, tenant: str, job_id: str) -> Job | None:
        try:
            return self.jobs.get(tenant, job_id)
        except NotFoundError:
            return None

    # --- rescuing --------------------------------------------------------------------------------

    def _rescue(
        self,
        item: dict[str, Any],
        run: Run,
        kind: Rescue,
        job: Job | None,
        sweep: _Sweep,
        summary: SweepSummary,
    ) -> bool:
        now = sweep.now
        if job is None:
            try:
                self.attempts.fail_unclaimed(
                    run, now, "the run's job was deleted before it ran", "lost", None
                )
                summary.failed += 1
                sweep.dead_lettered.add((run.job_id, run.run_key))
                self.metrics.add(obs.RUNS_DEAD_LETTERED)
                logger.warning("run %s was %s and its job is gone: failed (lost)", run.id, run.state)
            except ConflictError:
                pass
            return False
        sweeps = int(item.get("sweeps", 0))
        if sweeps >= self.max_sweeps:
            return self._give_up(item, run, job, sweeps, sweep, summary)
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
            return True  # it moved on by itself
        message = self._message(job, run, item, now)  # the run's send token: a copy of the lost send
        self.queues.send_one(message, now)
        logger.warning(
            "run %s was stranded (%s, %s); sent attempt %s again (re-send %s of %s)",
            run.id,
            run.state,
            _since(run, item),
            message.attempt,
            sweeps + 1,
            self.max_sweeps,
        )
        if kind == "reclaim":
            summary.reclaimed += 1
            self.metrics.add(obs.RUNS_RECLAIMED)
        else:
            summary.resent += 1
            self.metrics.add(obs.RUNS_RESENT)
        return True

    def _give_up(
        self, item: dict[str, Any], run: Run, job: Job, sweeps: int, sweep: _Sweep, summary: SweepSummary
    ) -> bool:
        """End a run still stranded after ``max_sweeps`` re-sends: ``failed``, reason ``stranded`` (a
        dead letter, replayable), unless its queue holds a backlog its message may be waiting in."""
        queue = queue_for(run.pool, run.priority)
        if sweep.backlog(self.queues, queue):
            summary.deferred += 1
            logger.warning(
                "run %s is still %s after %s re-sends, but the %s queue holds a backlog: not declared "
                "stranded yet",
                run.id,
                run.state,
                sweeps,
                queue,
            )
            return True
        error = (
            f"stranded: the run stayed {run.state} ({_since(run, item)}) through {sweeps} re-sends "
            "by the sweeper and no worker took it"
        )
        message = self._message(job, run, item, sweep.now).to_json()
        try:
            self.attempts.fail_unclaimed(run, sweep.now, error, STRANDED, message)
        except ConflictError:
            return True  # it moved on meanwhile
        summary.stranded += 1
        sweep.dead_lettered.add((run.job_id, run.run_key))
        self.metrics.add(obs.RUNS_STRANDED)
        self.metrics.add(obs.RUNS_DEAD_LETTERED)
        logger.error("run %s declared stranded and dead-lettered: %s", run.id, error)
        return False

    def _message(self, job: Job, run: Run, item: dict[str, Any], now: datetime) -> RunMessage:
        """The message of the run's next attempt: from the job, or for a workflow node from its node."""
        if run.wf_node is not None and self.workflows is not None:
            message = self.workflows.node_message(item, now)
            if message is not None:
                return message
        return outgoing_for(job, run, now).message

    def _finish_replay(self, item: dict[str, Any], now: datetime, summary: SweepSummary) -> None:
        """Re-send a stranded replay's message if its run still waits for it, then do the replay's
        last write (:func:`jobsched.services.runs.finish_replay`)."""
        message = RunMessage.from_json(item[REPLAY_MESSAGE])
        waiting = item.get("state") == RunState.QUEUED and int(item.get("attempt", 0)) + 1 == message.attempt
        if waiting:
            self.queues.send_one(message, now)
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


class WorkflowHooks(Protocol):
    """What the sweeper needs of DAG workflows (:class:`jobsched.services.workflows.WorkflowEngine`)."""

    def owns(self, item: Mapping[str, Any]) -> bool: ...

    def sweep(self, item: Mapping[str, Any], now: datetime, grace: timedelta) -> bool: ...

    def node_message(self, item: Mapping[str, Any], now: datetime) -> RunMessage | None: ...


class DepthSampler(Protocol):
    """Keeps a sample of the run queues' depth (:class:`jobsched.aws.queue_depths.QueueDepths`)."""

    def sample(self, now: datetime) -> int: ...


class RunStats(Protocol):
    """Counts settled runs per tenant and minute (:class:`jobsched.aws.run_stats_store.RunStatsStore`)."""

    def add(self, tallies: Mapping[tuple[str, str], Mapping[str, int]]) -> int: ...


def _ended(item: dict[str, Any], now: datetime, dead_lettered: bool) -> dict[str, Any]:
    """An ended run as counted: a run the examination itself ended was read while still active, and
    is counted as failed; one it put in the dead letters (stranded, or its job gone) as dead-lettered
    at ``now``."""
    if item.get("state") not in _ACTIVE:
        return item
    ended = {**item, "state": str(RunState.FAILED)}
    return {**ended, "dl_at": to_iso(now)} if dead_lettered else ended


class _Sweep:
    """What one sweep remembers: its instant, the runs examined, the jobs read, the queue backlogs."""

    def __init__(self, now: datetime):
        self.now = now
        #: run key -> (still active after the examination, its tenant)
        self.seen: dict[tuple[str, str], tuple[bool, str]] = {}
        self.jobs: dict[str, Job | None] = {}
        #: run key -> the item of a run examined and found ended (what settling its ledger item counts)
        self.ended: dict[tuple[str, str], dict[str, Any]] = {}
        #: run key -> of the runs examined, those this sweep put in the dead letters
        self.dead_lettered: set[tuple[str, str]] = set()
        #: run key -> the ended runs of the ledger items this sweep deleted, each run once
        self.settled_runs: dict[tuple[str, str], dict[str, Any]] = {}
        self._backlogs: dict[str, bool] = {}
        #: queue kind (``queue_for(pool, priority)``: a priority for the lambda pool, else ``long`` or
        #: ``container``) -> the earliest due instant of a run found ``queued``, past due and not
        #: waiting for a limit (its message is in the queue, ready): the age backpressure reads
        #: (default, low) and the OldestRun alarms watch (every priority).
        self.oldest_queued: dict[str, datetime] = {}

    def note_queued(self, item: Mapping[str, Any]) -> None:
        """Count ``item`` toward its queue's oldest queued run if it waits in its queue, ready."""
        if item.get("state") != RunState.QUEUED or item.get("waiting_for") or not item.get("due_at"):
            return
        due = from_iso(item["due_at"])
        if due > self.now:
            return
        priority = str(item.get("priority", "default"))
        if priority not in PRIORITIES or item.get("pool") not in (None, *POOLS):
            return
        queue = queue_for(item.get("pool"), priority)
        if queue not in self.oldest_queued or due < self.oldest_queued[queue]:
            self.oldest_queued[queue] = due

    def settle(self, ledger: Mapping[str, Any]) -> None:
        """Note the ended runs ``ledger`` names: this sweep deleted it, so they are counted once."""
        for entry in ledger.get("runs", []):
            k = entry_key(entry)
            key = (k["job_id"], k["run_key"])
            if key in self.ended:
                self.settled_runs[key] = self.ended[key]

    def oldest_queued_age(self, priority: str) -> float:
        """Seconds the oldest queued, past-due run of ``priority`` has waited since due (0: none)."""
        oldest = self.oldest_queued.get(priority)
        return 0.0 if oldest is None else max(0.0, (self.now - oldest).total_seconds())

    def backlog(self, queues: RunQueue, queue: str) -> bool:
        """Whether the ``queue`` (a run's ``queue_for(pool, priority)``) holds visible messages (read
        once per sweep; unreadable counts as a backlog: never declare a run stranded on a guess)."""
        if queue not in self._backlogs:
            try:
                self._backlogs[queue] = queues.visible_messages(queue) > 0
            except QueueReadError:
                self._backlogs[queue] = True
        return self._backlogs[queue]


def _since(run: Run, item: dict[str, Any] | None) -> str:
    """What the run has been waiting for, in words (for the logs and the dead letter's error)."""
    if run.state is RunState.RUNNING:
        return f"lease expired at {to_iso(run.lease_until)}" if run.lease_until else "lease expired"
    if run.state is RunState.RETRYING:
        retry_at = (item or {}).get("retry_at")
        return f"retry due at {retry_at}" if retry_at else "retry due"
    return f"due at {to_iso(run.due_at)}"
