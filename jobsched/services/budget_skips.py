"""The worker's spend cap: a run queued ahead is recorded skipped (reason ``budget``) instead of
starting when its tenant reached its monthly budget after the run was queued (decision 0062, amended).

The dispatcher queues runs up to the enqueue horizon ahead (900 s by default) with SQS delays and
marks the messages of a tenant that has a budget ``budgeted``. Before the first attempt of such a
delivery (attempt 1, before the limits and the claim) :meth:`QueuedAheadCap.skip` asks the worker's
:class:`jobsched.services.budgets.BudgetGate` (a tenant's status read at most once a minute per
container); a capped tenant's run that is still ``queued`` with no attempt begun is moved to
``skipped``/``budget`` with one conditional write (:meth:`AttemptStore.skip_unstarted`), counted in
``RunsSkipped`` and ``RunsSkippedBudget``. A message without the mark (a tenant without a budget)
costs nothing: no read, no write.

A scheduled occurrence skipped this way then rewinds its job's cursor to it (one read and one
conditional write of the job, the dispatcher's own :meth:`JobsStore.advance`, only when the cursor is
past it), as a pause rewinds to the runs it withdraws: the dispatcher holds the job there while the
tenant is capped, and once the cap is raised plans it from there under its misfire policy, reviving
the ``skipped``/``budget`` records in place, exactly as it does for the occurrences it held itself.

Retries and takeovers (attempt 2 on) are runs under way and finish; a run another delivery already
claimed fails the condition and goes on to the claim, which answers it as usual.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import datetime
from typing import Protocol

from jobsched.aws.jobs_store import StaleJobError
from jobsched.core.budgets import SKIP_REASON_BUDGET
from jobsched.core.errors import NotFoundError
from jobsched.core.messages import RunMessage
from jobsched.core.models import JobState, Run, Trigger
from jobsched.ports.stores import AttemptRecords, JobRecords
from jobsched.runtime import observability as obs
from jobsched.services.outcome import Outcome, OutcomeStatus

logger = logging.getLogger(__name__)

#: Occurrences of the schedule (a manual run, a backfill, a replay has no place in the job's cursor).
SCHEDULED_TRIGGERS = (Trigger.SCHEDULE, Trigger.CATCHUP)
#: Tries of the job's rewind when a concurrent tick or edit changed it between its read and write.
REWIND_TRIES = 3


class CapCheck(Protocol):
    """Whether a tenant is over its monthly budget (:class:`jobsched.services.budgets.BudgetGate`)."""

    def capped(self, tenant: str, now: datetime) -> bool: ...


class QueuedAheadCap:
    """See the module docstring."""

    def __init__(
        self,
        gate: CapCheck,
        attempts: AttemptRecords,
        jobs: JobRecords,
        metrics: obs.MetricSink | None = None,
    ):
        self.gate = gate
        self.attempts = attempts
        self.jobs = jobs
        self.metrics = metrics or obs.NullSink()

    def skip(self, msg: RunMessage, now: datetime) -> Outcome | None:
        """The delivery's answer when its run was recorded skipped for the budget; None when it goes on."""
        if not msg.budgeted or msg.attempt != 1 or not self.gate.capped(msg.tenant, now):
            return None
        run = self.attempts.skip_unstarted(msg.run_id, msg.token, now, SKIP_REASON_BUDGET)
        if run is None:
            return None
        self.metrics.add(obs.RUNS_SKIPPED)
        self.metrics.add(obs.skipped_metric(SKIP_REASON_BUDGET))
        logger.info("run %s not started: tenant %s is over its monthly budget", run.id, run.tenant)
        try:
            self._rewind(run, now)
        except Exception:  # the run stays skipped; only the revive on a raised cap is lost
            logger.exception("could not rewind job %s to its skipped occurrence %s", run.job_id, run.id)
        return Outcome(
            OutcomeStatus.FINISHED, msg.run_id, msg.attempt, detail={"skipped": SKIP_REASON_BUDGET}
        )

    def _rewind(self, run: Run, now: datetime) -> None:
        """Move the job's cursor back to the skipped occurrence (see the module docstring)."""
        if run.trigger not in SCHEDULED_TRIGGERS:
            return
        for _ in range(REWIND_TRIES):
            try:
                job = self.jobs.get(run.tenant, run.job_id)
            except NotFoundError:
                return
            cursor = job.next_due_at
            if job.state is not JobState.ACTIVE or cursor is None or cursor <= run.scheduled_at:
                return
            try:
                self.jobs.advance(job, replace(job, next_due_at=run.scheduled_at, updated_at=now), None)
                return
            except StaleJobError:
                continue
