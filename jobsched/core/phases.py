"""A run's phases over time, from the instants its item already records: what a workflow run's timeline
draws per node (docs/decisions/0064-queue-depth-dead-letters-and-phases.md). Pure.

- ``queued``: from when the run entered the queue (its creation, or its due instant when it was queued
  ahead; a replay's instant) until it started or began waiting for a limit;
- ``waiting``: its delivery was held by a concurrency or rate limit, from the first wait of that attempt
  (``limit_wait_<n>``, written by the wait's own write) until the attempt started;
- ``running``: an attempt, from its start to its end;
- ``retrying``: between an attempt's end and the next one's start (or wait): the backoff.

A phase still going on has no end (``None``); a wait of no length is left out, an attempt is
not. Runs written before the per-attempt wait instants were
kept have only ``first_waited_at``: it is placed before the first attempt that started after it.
The time between a run's failure and its replay is not a phase (the run had ended).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from jobsched.core.instants import from_iso
from jobsched.core.models import ACTIVE_RUN_STATES, Run, RunState

PhaseName = Literal["queued", "waiting", "running", "retrying"]
PHASES: tuple[PhaseName, ...] = ("queued", "waiting", "running", "retrying")


@dataclass(frozen=True)
class Phase:
    """One span of a run's life; ``attempt``: the attempt it is (running) or leads to."""

    phase: PhaseName
    start: datetime
    end: datetime | None
    attempt: int


def _waits(run: Run) -> dict[int, datetime]:
    """The first wait per attempt; an older run's ``first_waited_at`` goes to the attempt after it."""
    if run.limit_waits or run.first_waited_at is None:
        return dict(run.limit_waits)
    for attempt in sorted(run.attempts, key=lambda a: a.attempt):
        if attempt.started_at >= run.first_waited_at:
            return {attempt.attempt: run.first_waited_at}
    return {run.attempt + 1: run.first_waited_at}


def run_phases(run: Run) -> list[Phase]:
    """The run's phases, oldest first (none for a skipped occurrence: it never entered the queue)."""
    if run.state is RunState.SKIPPED:
        return []
    waits = _waits(run)
    replays = sorted(from_iso(r["at"]) for r in run.replays if r.get("at"))
    attempts = sorted(run.attempts, key=lambda a: a.attempt)
    out: list[Phase] = []

    def span(kind: PhaseName, start: datetime, end: datetime | None, attempt: int) -> None:
        if end is None or end > start or (kind == "running" and end == start):
            out.append(Phase(kind, start, end, attempt))  # an attempt however short; no empty wait

    def lead_in(kind: PhaseName, start: datetime, end: datetime | None, attempt: int) -> None:
        """From ``start`` to ``end`` (the attempt's start; None: not yet) in ``kind``, split where a
        replay re-queued it and where its delivery began waiting for a limit."""
        for at in replays:
            if start < at and (end is None or at <= end):
                start, kind = at, "queued"  # before the replay the run had ended: no phase
        wait = waits.get(attempt)
        if wait is not None and start <= wait and (end is None or wait < end):
            span(kind, start, wait, attempt)
            span("waiting", wait, end, attempt)
        else:
            span(kind, start, end, attempt)

    cursor = max(run.created_at, run.due_at)
    kind: PhaseName = "queued"
    for i, attempt in enumerate(attempts):
        lead_in(kind, cursor, attempt.started_at, attempt.attempt)
        end = attempt.finished_at
        if end is None and i + 1 < len(attempts):
            end = attempts[i + 1].started_at  # taken over: the next attempt began
        if end is None and run.state not in ACTIVE_RUN_STATES:
            end = run.finished_at
        span("running", attempt.started_at, end, attempt.attempt)
        if end is None:
            return out
        cursor, kind = end, "retrying"
    if run.state in (RunState.QUEUED, RunState.RETRYING):
        lead_in(kind, cursor, None, run.attempt + 1)
    elif run.state is RunState.CANCELLED and run.finished_at is not None:
        lead_in(kind, cursor, run.finished_at, run.attempt + 1)  # cancelled before its next attempt
    return out
