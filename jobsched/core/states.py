"""States and their transitions: jobs, runs, triggers, and the policy names a job may choose.

Part of the data model's vocabulary (:mod:`jobsched.core.models` re-exports every public name). Pure.
"""

from __future__ import annotations

from enum import StrEnum

from jobsched.core.errors import ConflictError

# --- enumerations ----------------------------------------------------------------------------------

PRIORITIES = ("high", "default", "low")
MISFIRE_POLICIES = ("run_once", "run_all", "skip")
OVERLAP_POLICIES = ("allow", "skip", "buffer_one", "replace")
DST_GAP_POLICIES = ("shift", "skip")
DST_OVERLAP_POLICIES = ("first", "both")


class JobState(StrEnum):
    ACTIVE = "active"
    PAUSED = "paused"
    COMPLETED = "completed"


class RunState(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    RETRYING = "retrying"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    SKIPPED = "skipped"


class Trigger(StrEnum):
    SCHEDULE = "schedule"
    CATCHUP = "catchup"
    MANUAL = "manual"
    BACKFILL = "backfill"
    REPLAY = "replay"


ACTIVE_RUN_STATES = frozenset({RunState.QUEUED, RunState.RUNNING, RunState.RETRYING})
TERMINAL_RUN_STATES = frozenset({RunState.SUCCEEDED, RunState.FAILED, RunState.CANCELLED, RunState.SKIPPED})

ALLOWED_TRANSITIONS: dict[RunState, frozenset[RunState]] = {
    RunState.QUEUED: frozenset({RunState.RUNNING, RunState.CANCELLED, RunState.SKIPPED}),
    RunState.RUNNING: frozenset({RunState.SUCCEEDED, RunState.FAILED, RunState.CANCELLED, RunState.RETRYING}),
    RunState.RETRYING: frozenset({RunState.RUNNING, RunState.CANCELLED, RunState.FAILED}),
    RunState.FAILED: frozenset({RunState.QUEUED}),
    RunState.SUCCEEDED: frozenset(),
    RunState.CANCELLED: frozenset(),
    RunState.SKIPPED: frozenset(),
}


def check_transition(old: RunState | str, new: RunState | str) -> None:
    """Raise :class:`ConflictError` unless ``old -> new`` is an allowed run state transition.

    ``queued -> running -> succeeded|failed|cancelled``, ``running -> retrying -> running``,
    ``queued -> cancelled|skipped``, ``failed -> queued`` (replay). ``retrying -> cancelled`` (cancel
    while waiting out a backoff) and ``retrying -> failed`` (a lost retry found exhausted by the sweeper)
    are allowed too.
    """
    try:
        old_state, new_state = RunState(old), RunState(new)
    except ValueError as exc:
        raise ConflictError(f"unknown run state in transition {old!r} -> {new!r}") from exc
    if new_state not in ALLOWED_TRANSITIONS[old_state]:
        allowed = ", ".join(sorted(ALLOWED_TRANSITIONS[old_state])) or "none (terminal state)"
        raise ConflictError(
            f"a {old_state} run cannot become {new_state}; allowed from {old_state}: {allowed}"
        )
