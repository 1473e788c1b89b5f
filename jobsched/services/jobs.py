"""The job service: create, update, delete, pause, resume, trigger now, backfill.

The tenant is always a parameter taken from the caller's identity; another tenant's job answers
:class:`NotFoundError`. Every definition is validated in full before anything is written, and every
write is conditional, so bad input or a lost race changes nothing. A job whose next occurrence falls
inside the dispatcher's look-ahead is dispatched at once, so a one-off job a few seconds ahead fires
on time instead of waiting for the next tick.
"""

from __future__ import annotations

import builtins
import logging
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from jobsched.aws.errors import AwsError
from jobsched.aws.jobs_store import StaleJobError
from jobsched.core.dispatch_plan import first_fire_after, schedule_of
from jobsched.core.edits import SKIP_REASON_RESCHEDULED, TIMING_FIELDS, touches_runs
from jobsched.core.errors import ConflictError, PreconditionFailedError, ValidationError
from jobsched.core.handlers import DrainingVersionError, HandlerCatalog, pinned_versions
from jobsched.core.history import resumed
from jobsched.core.job_specs import (
    CheckedSpec,
    check_contract,
    check_spec,
    spec_from_dict,
    validate_payload,
    validate_spec,
    with_pool,
)
from jobsched.core.models import Job, JobSpec, JobState, Run, RunState, Trigger, require_aware
from jobsched.core.policies import MISFIRE_POLICIES
from jobsched.core.pools import LAMBDA_TIME_LIMIT_SECONDS
from jobsched.core.run_records import new_run, outgoing_for
from jobsched.core.timeline import fires_between
from jobsched.ports.handlers import DrainingMarks
from jobsched.ports.stores import JobRecords, RunRecords
from jobsched.services.dispatcher import SKIP_REASON_DELETED, SKIP_REASON_PAUSED, Dispatcher
from jobsched.services.edits import replan_ahead
from jobsched.services.notifications import NotifyPolicy

MAX_BACKFILL = 1000
#: Conditional puts a backfill keeps in flight at once (decision 0020); the API's boto3 clients pool
#: 25 connections (jobsched/aws/clients.py), so they never wait for one.
PUT_CONCURRENCY = 8
_SCHEDULED = (Trigger.SCHEDULE, Trigger.CATCHUP)
logger = logging.getLogger(__name__)
_WRITE_ATTEMPTS = 3
_EPSILON = timedelta(milliseconds=1)


def new_job_id() -> str:
    """``j`` + 20 URL-safe random characters (120 bits): unguessable, no ``.``, globally unique."""
    return "j" + secrets.token_urlsafe(15)


@dataclass
class PauseResult:
    job: Job
    withdrawn: list[str]  # ids of runs queued ahead of their due instant, now skipped (reason paused)


class JobService:
    def __init__(
        self,
        jobs: JobRecords,
        runs: RunRecords,
        dispatcher: Dispatcher,
        *,
        catalog: HandlerCatalog | None = None,
        draining: DrainingMarks | None = None,
        id_factory: Callable[[], str] = new_job_id,
        nonce_factory: Callable[[], str] = lambda: secrets.token_urlsafe(9),
        notify_policy: NotifyPolicy | None = None,
        lambda_time_limit_seconds: int = LAMBDA_TIME_LIMIT_SECONDS,
    ):
        self.jobs = jobs
        self.runs = runs
        self.dispatcher = dispatcher
        #: The handler versions targets and payloads are checked against (None: not checked), and
        #: the versions marked draining, which no job may newly pin (None: none is).
        self.catalog = catalog
        self.draining = draining
        self.id_factory = id_factory
        self.nonce_factory = nonce_factory
        #: What a job's ``notify`` may name in this deployment (default: no SNS topic, any webhook
        #: whose host is not literally refused by the SSRF guard).
        self.notify_policy = notify_policy or NotifyPolicy()
        #: Lambda's limit in this deployment (``Settings.lambda_time_limit_seconds``): the longest
        #: timeout on the lambda and long pools, and the timeout beyond which a job's pool defaults to
        #: container.
        self.time_limit = lambda_time_limit_seconds

    # --- definitions ----------------------------------------------------------------------------

    def check(self, definition: JobSpec | Mapping[str, Any], now: datetime | None = None) -> CheckedSpec:
        """Validate a new job's definition without writing anything; with ``now``, also that its
        schedule has an occurrence from then. :meth:`create` takes the result and does not validate
        it again (the API checks a definition before it counts the job in the tenant's limit)."""
        checked = check_spec(definition, self.catalog, time_limit=self.time_limit)
        self._refuse_draining(checked.spec.target)
        if now is None:
            return checked
        require_aware(now, "now")
        return checked.due_from(now)

    def create(
        self,
        tenant: str,
        spec: CheckedSpec | JobSpec | Mapping[str, Any],
        now: datetime,
        *,
        job_id: str | None = None,
    ) -> Job:
        """Validate (unless ``spec`` was checked by :meth:`check`) and store a new job; dispatch it at
        once if it is due within the look-ahead.

        ``job_id`` (from :meth:`new_id`) is the id an ``Idempotency-Key`` claim fixed for this create;
        without it a new id is drawn. If a job with that id is already stored, the store's
        :class:`~jobsched.aws.jobs_store.JobExistsError` says so and the stored job is left as it is:
        the caller answers with :meth:`finish_create`.
        """
        require_aware(now, "now")
        checked = spec if isinstance(spec, CheckedSpec) else self.check(spec)
        self.notify_policy.check(checked.spec.notify)
        checked = checked.due_from(now)
        job_id = job_id or self.id_factory()
        job = Job(
            **checked.spec.spec_fields(),
            id=job_id,
            tenant=tenant,
            created_at=now,
            updated_at=now,
            next_due_at=checked.first_due,
            payload_version=checked.payload_version,
        )
        self.jobs.create(job)
        return self._dispatch_if_due(job, now)

    def new_id(self) -> str:
        """A fresh job id, as :meth:`create` would draw it (an ``Idempotency-Key`` claim keeps one)."""
        return self.id_factory()

    def finish_create(self, tenant: str, job_id: str, now: datetime) -> Job:
        """The job a create stored under ``job_id`` earlier, dispatched now if it is due.

        For a create found already written (a retried request whose first attempt died after the write,
        or a write the SDK retried): that attempt may have died before its immediate dispatch, so it is
        done here. Dispatching again creates no second run: run ids derive from the job and the instant,
        and the job's advance is conditional. :class:`NotFoundError` if no such job is stored.
        """
        require_aware(now, "now")
        return self._dispatch_if_due(self.jobs.get(tenant, job_id), now)

    def get(self, tenant: str, job_id: str) -> Job:
        return self.jobs.get(tenant, job_id)

    def list(
        self, tenant: str, *, limit: int = 50, cursor: str | None = None
    ) -> tuple[list[Job], str | None]:
        return self.jobs.list(tenant, limit=limit, start_after=cursor)

    def update(
        self, tenant: str, job_id: str, changes: Mapping[str, Any], expected_version: int, now: datetime
    ) -> Job:
        """Apply ``changes`` (definition fields) if the job is at ``expected_version``.

        A changed schedule, zone or DST policy recomputes the next occurrence from ``now``; the job
        keeps its state (a paused job stays paused). The runs queued ahead of ``now`` are re-planned
        (:mod:`jobsched.services.edits`): an edit of anything they carry refreshes them in place with
        the new definition, a timing edit records the old schedule's occurrences the new one does not
        have ``skipped`` (reason ``rescheduled``); the new schedule is then dispatched from ``now``.
        """
        require_aware(now, "now")

        rescheduled = False
        read: builtins.list[Job] = []  # the job each build started from: the last one was written over

        def build(current: Job) -> Job:
            nonlocal rescheduled
            read.append(current)
            merged = {**_spec_dict(current), **dict(changes)}
            # A job stored before jobs had pools gets one chosen as at creation (a chunked job: long).
            spec = with_pool(spec_from_dict(merged), self.catalog, self.time_limit)
            # A job written before handlers had versions keeps working for edits of anything else:
            # its pinned version and payload contract are checked when the target or payload changes.
            contract = spec.target != current.target or spec.payload != current.payload
            schedule = validate_spec(spec, self.catalog, versions=contract, time_limit=self.time_limit)
            payload_version = current.payload_version
            if contract:
                payload_version = check_contract(spec, self.catalog)
                if spec.target != current.target:
                    self._refuse_draining(spec.target)
            if "notify" in changes:
                self.notify_policy.check(spec.notify)
            next_due = current.next_due_at
            last_fired = current.last_fired_at
            timing = any(getattr(spec, f) != getattr(current, f) for f in TIMING_FIELDS)
            if timing:
                # The new schedule starts from the edit: the old one's runs still ahead are re-planned
                # below (kept where the new schedule has the same instant, else rescheduled).
                next_due = first_fire_after(schedule, now - _EPSILON)
                last_fired = min(last_fired, now) if last_fired else None
                rescheduled = True
            elif current.state is JobState.COMPLETED:
                after = max(t for t in (now - _EPSILON, current.last_fired_at) if t is not None)
                next_due = first_fire_after(schedule, after)
                rescheduled = True
            state = current.state
            if state is not JobState.PAUSED:
                state = JobState.ACTIVE if next_due is not None else JobState.COMPLETED
            return replace(
                current,
                **spec.spec_fields(),
                version=current.version + 1,
                updated_at=now,
                next_due_at=next_due,
                last_fired_at=last_fired,
                state=state,
                buffered_at=None if next_due != current.next_due_at else current.buffered_at,
                payload_version=payload_version,
            )

        job = self._write(tenant, job_id, expected_version, build)
        before = read[-1]
        if job.state is not JobState.PAUSED and touches_runs(before, job):
            jitter = max(before.jitter_seconds, job.jitter_seconds)
            queued = self.runs.queued_ahead(job.id, now, jitter)
            budgeted = self.dispatcher.budgeted(job.tenant, now)
            replan_ahead(self.runs, self.dispatcher.queues, before, job, queued, now, budgeted=budgeted)
        if rescheduled:
            self._drop_rescheduled(job, now)
        return self._dispatch_if_due(job, now)

    def delete(
        self, tenant: str, job_id: str, now: datetime, expected_version: int | None = None
    ) -> builtins.list[str]:
        """Delete the job (its run history stays); runs queued ahead are withdrawn (skipped, ``deleted``).
        A name declared for it (``PUT /jobs/by-name``) is released after the delete, so a later ``PUT``
        of that name creates a new job, under a new id (decision 0060)."""
        job = self.jobs.get(tenant, job_id)
        self.jobs.delete(tenant, job_id, expected_version)
        self.jobs.release_name(tenant, job.name, job_id)
        return self._withdraw(job, now, SKIP_REASON_DELETED)

    # --- lifecycle ------------------------------------------------------------------------------

    def pause(self, tenant: str, job_id: str, now: datetime, note: str | None = None) -> PauseResult:
        """Stop dispatching the job and withdraw its runs queued ahead of their due instant."""
        require_aware(now, "now")
        if note is not None and (not isinstance(note, str) or len(note) > 500):
            raise ValidationError("pause note must be a string of at most 500 characters", field="note")

        def build(current: Job) -> Job:
            if current.state is not JobState.ACTIVE:
                raise ConflictError(f"job {job_id} is {current.state}; only an active job can be paused")
            # The runs queued ahead are withdrawn below: the cursor goes back to the first of them, so
            # the dispatch after the resume decides them again (revives or skips them in place) instead
            # of leaving them skipped at instants the job may be active again. A tick racing this write
            # cannot advance the cursor past them: its advance is conditional on the state it read.
            ahead = self.runs.queued_ahead(job_id, now, current.jitter_seconds)
            first = min((r.scheduled_at for r in ahead if r.trigger in _SCHEDULED), default=None)
            next_due = current.next_due_at
            if first is not None and (next_due is None or first < next_due):
                next_due = first
            return replace(
                current,
                state=JobState.PAUSED,
                paused_note=note,
                paused_at=now,
                next_due_at=next_due,
                # Every run still standing is due by now (later ones are withdrawn), so an edit of the
                # schedule while paused starts the new one from the edit, not after a withdrawn run.
                last_fired_at=min(current.last_fired_at, now) if current.last_fired_at else None,
                version=current.version + 1,
                updated_at=now,
            )

        job = self._write(tenant, job_id, None, build)
        return PauseResult(job=job, withdrawn=self._withdraw(job, now, SKIP_REASON_PAUSED))

    def resume(self, tenant: str, job_id: str, now: datetime, misfire_policy: str | None = None) -> Job:
        """Resume a paused job. Occurrences missed while paused follow the job's misfire policy, or
        ``misfire_policy`` when given (for this backlog only)."""
        require_aware(now, "now")
        if misfire_policy is not None and misfire_policy not in MISFIRE_POLICIES:
            raise ValidationError(
                f"misfire policy {misfire_policy!r} is not allowed: use {', '.join(MISFIRE_POLICIES)}",
                field="misfire_policy",
            )

        def build(current: Job) -> Job:
            if current.state is not JobState.PAUSED:
                raise ConflictError(f"job {job_id} is {current.state}; only a paused job can be resumed")
            return resumed(current, now, misfire_policy)  # also what the history's resume preview plans

        job = self._write(tenant, job_id, None, build)
        return self._dispatch_if_due(job, now)

    # --- runs on demand -------------------------------------------------------------------------

    def trigger(
        self,
        tenant: str,
        job_id: str,
        now: datetime,
        *,
        payload: dict[str, Any] | None = None,
        nonce: str | None = None,
    ) -> Run:
        """Run the job now, outside its schedule (also when paused). ``nonce`` makes a retried call
        idempotent (same nonce, same run); ``payload`` overrides the job's payload for this run. A
        tenant over its monthly budget is refused (:meth:`refuse_if_capped`): no run is made."""
        require_aware(now, "now")
        if payload is not None:
            validate_payload(payload)
        job = self.jobs.get(tenant, job_id)
        self.refuse_if_capped(tenant, now, f"trigger of {job_id}")
        run = new_run(
            job, now, Trigger.MANUAL, now, nonce=nonce or self.nonce_factory(), payload_override=payload
        )
        return self._create_and_send(job, [run], now)[0]

    def backfill(
        self, tenant: str, job_id: str, start: datetime, end: datetime, now: datetime
    ) -> builtins.list[Run]:
        """Create one run (trigger ``backfill``) per occurrence in ``[start, end]``, all due now.

        Idempotent per occurrence: backfilling the same range twice creates no second run.
        """
        job, instants = self.backfill_plan(tenant, job_id, start, end)
        return self.backfill_now(job, instants, now)

    def backfill_now(self, job: Job, instants: builtins.list[datetime], now: datetime) -> builtins.list[Run]:
        """The runs of a planned backfill (:meth:`backfill_plan`), made and sent within the call."""
        self.refuse_if_capped(job.tenant, now, f"backfill of {job.id}")
        runs = [replace(new_run(job, at, Trigger.BACKFILL, now), due_at=now) for at in instants]
        return self._create_and_send(job, runs, now)

    def backfill_plan(
        self, tenant: str, job_id: str, start: datetime, end: datetime
    ) -> tuple[Job, builtins.list[datetime]]:
        """The job and the occurrences a backfill of ``[start, end]`` makes runs for (at most
        :data:`MAX_BACKFILL`, else :class:`ValidationError`), without writing anything."""
        require_aware(start, "start")
        require_aware(end, "end")
        if end < start:
            raise ValidationError("backfill end is before its start", field="end")
        job = self.jobs.get(tenant, job_id)
        fires = fires_between(schedule_of(job), start - _EPSILON, end, MAX_BACKFILL + 1)
        if len(fires) > MAX_BACKFILL:
            raise ValidationError(
                f"the range holds more than {MAX_BACKFILL} occurrences: backfill it in smaller ranges",
                field="end",
            )
        return job, [f.at for f in fires]

    def runs_of(
        self,
        tenant: str,
        job_id: str,
        *,
        limit: int = 50,
        cursor: str | None = None,
        now: datetime | None = None,
        upcoming: bool = False,
    ) -> tuple[builtins.list[Run], str | None]:
        """A job's runs. With ``now``: its history (scheduled at or before ``now``, newest first), or
        with ``upcoming`` the runs scheduled after ``now`` (soonest first: those queued ahead, or
        withdrawn by a pause). Without ``now``: every run, newest first."""
        self.jobs.get(tenant, job_id)  # tenant check: another tenant's job is not found
        if now is None:
            return self.runs.list_for_job(job_id, limit=limit, start_after=cursor)
        if upcoming:
            return self.runs.list_for_job(
                job_id, limit=limit, start_after=cursor, newest_first=False, after=now
            )
        return self.runs.list_for_job(job_id, limit=limit, start_after=cursor, until=now)

    def refuse_if_capped(self, tenant: str, now: datetime, operation: str) -> None:
        """:class:`BudgetExhaustedError` (409 ``budget_exhausted``) when the tenant is over its monthly
        budget (the dispatcher's gate, decision 0062): a trigger and a backfill ask it before they
        write anything. Nothing to ask without spend caps."""
        if self.dispatcher.budgets is not None:
            self.dispatcher.budgets.refuse_if_capped(tenant, now, operation)

    # --- helpers --------------------------------------------------------------------------------

    def _refuse_draining(self, target: Any) -> None:
        """409 when ``target`` pins a handler version marked draining (decision 0049)."""
        pins = pinned_versions(target)
        if not pins or self.draining is None:
            return
        marked = self.draining.draining()
        for name, version in pins:
            if (name, version) in marked:
                raise DrainingVersionError(
                    f"handler {name!r} version {version} is draining: no new job may pin it; pin a newer "
                    "version or leave the version out to run the newest"
                )

    def _write(
        self, tenant: str, job_id: str, expected_version: int | None, build: Callable[[Job], Job]
    ) -> Job:
        """Read the job, build its new definition, write it conditionally on what was read.

        A dispatcher advance in between (same version, newer ``updated_at``) is not the caller's
        conflict: re-read and rebuild, a few times, instead of rolling the dispatch cursor back.
        """
        for _ in range(_WRITE_ATTEMPTS):
            current = self.jobs.get(tenant, job_id)
            if expected_version is not None and current.version != expected_version:
                raise PreconditionFailedError(
                    f"job {job_id} is at version {current.version}, not {expected_version}"
                )
            job = build(current)
            try:
                return self.jobs.replace(job, current.version, read=current)
            except StaleJobError:
                continue
        raise ConflictError(f"job {job_id} is being dispatched right now; retry the request")

    def _create_and_send(self, job: Job, runs: builtins.list[Run], now: datetime) -> builtins.list[Run]:
        """Announce, put (each conditionally) and send ``runs``; a backfill's many runs are put with up
        to :data:`PUT_CONCURRENCY` requests in flight (decision 0020), then sent in batches of 10."""
        stored_runs, outgoing = [], []
        self.runs.announce(runs)  # in the tenant's run feed before any put (one batch for a backfill)
        for stored, _ in self.runs.put_announced_many(runs, concurrency=PUT_CONCURRENCY):
            stored_runs.append(stored)
            if stored.state is RunState.QUEUED:
                outgoing.append(outgoing_for(job, stored, now))
        report = self.dispatcher.queues.send(outgoing)
        if report.failed:
            # The runs exist and are queued; the sweeper re-sends queued runs whose message was lost.
            raise ConflictError(
                f"{len(report.failed)} run message(s) could not be queued yet; they will be retried"
            )
        return stored_runs

    def _dispatch_if_due(self, job: Job, now: datetime) -> Job:
        due = [t for t in (job.next_due_at, job.buffered_at) if t is not None]
        if job.state is not JobState.ACTIVE or not due or min(due) > now + self.dispatcher.lookahead:
            return job
        try:
            self.dispatcher.dispatch_jobs([job], now)
        except AwsError as exc:
            # The job is stored; the shard's next tick dispatches it (at most one tick late).
            logger.warning("immediate dispatch of job %s failed, left to the next tick: %s", job.id, exc)
            return job
        return self.jobs.get(job.tenant, job.id)

    def _drop_rescheduled(self, job: Job, now: datetime) -> None:
        """After a schedule change: the occurrences a pause withdrew that are still ahead and that the
        dispatcher will not decide again (the new schedule does not have them, or they are before its
        cursor) are relabelled ``rescheduled``, so no record says ``paused`` at an instant the job may
        be active at. The others are revived when the dispatcher reaches them."""
        schedule = schedule_of(job)
        for run in self.runs.withdrawn_after(job.id, now, job.jitter_seconds, SKIP_REASON_PAUSED):
            at = run.scheduled_at
            kept = job.next_due_at is not None and at >= job.next_due_at
            if kept and first_fire_after(schedule, at - _EPSILON) == at:
                continue
            self.runs.relabel_skipped(run, SKIP_REASON_PAUSED, SKIP_REASON_RESCHEDULED)

    def _withdraw(self, job: Job, now: datetime, reason: str) -> builtins.list[str]:
        withdrawn = []
        for run in self.runs.queued_ahead(job.id, now, job.jitter_seconds):
            if self.runs.transition(run, RunState.SKIPPED, now, reason=reason) is not None:
                withdrawn.append(run.id)
        return withdrawn


def _spec_dict(job: Job) -> dict[str, Any]:
    return job.spec_fields() | {"retry": job.retry.to_dict()}
