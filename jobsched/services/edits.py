"""Edits reach the runs queued ahead: a job's runs already queued for instants after an edit are re-planned.

Used by :meth:`jobsched.services.jobs.JobService.update` for the runs queued ahead of the edit, and
by the dispatcher for the runs a tick queued from the job as it read it before a concurrent edit
(its advance is then refused). Each run is decided by :func:`jobsched.core.edits.decide_ahead`:

- *refresh*: one conditional ``UpdateItem`` gives it a fresh ``send_token`` (and the edited due
  instant, priority, ``max_attempts`` and the job version it now carries), conditional on the run
  still being ``queued`` under an older job version; then a message with the edited definition is
  sent. The message it was first sent with is still in its queue until its due instant and is
  *stale* at the claim (its token is not the run's any more), so the run executes with the edited
  definition, under its one id;
- *reschedule*: the edited timing has no occurrence at the run's instant: it is recorded ``skipped``
  with reason ``rescheduled`` (conditional on the same), final; its message then runs nothing;
- *keep*: nothing it carries changed (a timing edit whose new schedule also fires at its instant):
  its message stands.

A run whose condition fails moved on by itself (claimed, withdrawn) or was queued by this version or a
newer one (whose writer sent its own message): it is left alone. The version condition is what makes
two writers safe together — the edit and a tick that read the job before it, or two edits: each run
ends with the newest definition that reached it, never an older one put back.

Cost per edit: the Query of the job's runs from the edit on (``queued_ahead``), then per run queued
ahead one UpdateItem (the run item's size in WRU, 1 for a cron run) and, for a refreshed run, a tenth
of a SendMessageBatch; plus, only when the edit moves due instants earlier (a smaller
``jitter_seconds``), one ledger item naming the moved runs
(docs/decisions/0030-edits-replan-and-the-900-s-horizon.md).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime

from jobsched.core.dispatch_plan import schedule_of
from jobsched.core.edits import SKIP_REASON_RESCHEDULED, Ahead, decide_ahead, refreshed
from jobsched.core.models import Job, Run, RunState
from jobsched.core.run_records import outgoing_for
from jobsched.ports.stores import RunQueue, RunRecords

logger = logging.getLogger(__name__)


@dataclass
class Replanned:
    """What an edit did to the runs queued ahead (run ids)."""

    refreshed: list[str] = field(default_factory=list)
    rescheduled: list[str] = field(default_factory=list)
    kept: int = 0
    unsent: int = 0  # refreshed runs whose message could not be sent: the sweeper re-sends them


def replan_ahead(
    runs: RunRecords,
    queues: RunQueue,
    before: Job,
    after: Job,
    queued: Iterable[Run],
    now: datetime,
    *,
    budgeted: bool = False,
) -> Replanned:
    """Re-plan ``queued`` (runs of the job read ``queued``) for the edit from ``before`` to ``after``.
    ``budgeted``: the job's tenant has a monthly budget, so the messages re-sent are marked for the
    worker's spend-cap check (decision 0062), as the dispatcher's are."""
    out = Replanned()
    schedule = schedule_of(after)
    pending: list[tuple[Run, Run]] = []
    for run in queued:
        if run.state is not RunState.QUEUED or (run.job_version or 0) >= after.version:
            continue
        decision = decide_ahead(before, after, run, schedule)
        if decision is Ahead.RESCHEDULE:
            if runs.reschedule(run, after.version, now, SKIP_REASON_RESCHEDULED) is not None:
                out.rescheduled.append(run.id)
        elif decision is Ahead.REFRESH:
            pending.append((run, refreshed(run, after)))
        else:
            out.kept += 1
    earlier = [new for old, new in pending if new.due_at < old.due_at]
    if earlier:  # the sweeper's reach from the new, earlier due instants (decision 0014)
        runs.announce(earlier, feed=False, at=now)
    written: list[Run] = []
    for old, new in pending:
        stored = runs.refresh(old, new, after.version)
        if stored is not None:
            written.append(stored)
            out.refreshed.append(stored.id)
    if written:
        outgoing = [outgoing_for(after, run, now) for run in written]
        if budgeted:
            outgoing = [replace(o, message=replace(o.message, budgeted=True)) for o in outgoing]
        report = queues.send(outgoing)
        out.unsent = len(report.failed)
        if report.failed:
            logger.warning(
                "job %s: %d refreshed run message(s) not sent; the sweeper re-sends them",
                after.id,
                len(report.failed),
            )
    return out
