"""Overlap policy: what to do with a new occurrence while the job's previous run is still active.

"Active" means the previous run is ``queued``, ``retrying`` or ``running``. The policies:

- ``allow`` (default): enqueue the new run; runs of the job may run side by side.
- ``skip``: record the new occurrence skipped (reason ``overlap``).
- ``buffer_one``: at most one occurrence waits. The first that arrives while the previous run is
  active is buffered (the caller stores its instant on the job, it is not enqueued); any further one
  is skipped (reason ``overlap``). When the previous run ends, the caller enqueues the buffered one
  and clears the buffer. If the caller finds a buffered instant while no run is active (the finish
  hook was lost), the decision says ``release_buffered``: enqueue the buffered one first, and the new
  occurrence is then decided as if that released run were active (it takes the buffer slot).
- ``replace``: enqueue the new run and cancel the previous one (reason ``replaced``).

When no run is active every policy enqueues. Pure: no I/O, the caller supplies the facts.
"""

from __future__ import annotations

from dataclasses import dataclass

from jobsched.core.errors import ValidationError

OVERLAP_POLICIES = ("allow", "skip", "buffer_one", "replace")
DEFAULT_OVERLAP_POLICY = "allow"

ENQUEUE = "enqueue"
SKIP = "skip"
BUFFER = "buffer"
ENQUEUE_AND_CANCEL_PREVIOUS = "enqueue_and_cancel_previous"
OVERLAP_ACTIONS = (ENQUEUE, SKIP, BUFFER, ENQUEUE_AND_CANCEL_PREVIOUS)

SKIP_REASON_OVERLAP = "overlap"
CANCEL_REASON_REPLACED = "replaced"


@dataclass(frozen=True)
class OverlapDecision:
    """The action for the new occurrence.

    ``action``: ``enqueue`` | ``skip`` | ``buffer`` | ``enqueue_and_cancel_previous``.
    ``reason``: for ``skip`` the skipped run's reason (``overlap``); for
    ``enqueue_and_cancel_previous`` the cancelled previous run's reason (``replaced``); else None.
    ``release_buffered``: enqueue the job's buffered occurrence first (only under ``buffer_one``,
    when a buffered instant is found with no run active).
    """

    action: str
    reason: str | None = None
    release_buffered: bool = False


def decide_overlap(policy: str, previous_active: bool, buffered_waiting: bool = False) -> OverlapDecision:
    """Decide what happens to a new occurrence given the job's overlap ``policy``.

    ``previous_active``: a run of the job is queued, retrying or running.
    ``buffered_waiting``: the job holds a buffered occurrence (only meaningful for ``buffer_one``;
    other policies never buffer and ignore it).
    """
    validate_overlap_policy(policy)
    if policy == "buffer_one":
        if not previous_active and buffered_waiting:
            return OverlapDecision(BUFFER, release_buffered=True)
        if not previous_active:
            return OverlapDecision(ENQUEUE)
        if buffered_waiting:
            return OverlapDecision(SKIP, reason=SKIP_REASON_OVERLAP)
        return OverlapDecision(BUFFER)
    if not previous_active or policy == "allow":
        return OverlapDecision(ENQUEUE)
    if policy == "skip":
        return OverlapDecision(SKIP, reason=SKIP_REASON_OVERLAP)
    return OverlapDecision(ENQUEUE_AND_CANCEL_PREVIOUS, reason=CANCEL_REASON_REPLACED)


def validate_overlap_policy(policy: str) -> None:
    """Raise :class:`ValidationError` naming the bad policy and the allowed ones."""
    if policy not in OVERLAP_POLICIES:
        raise ValidationError(
            f"unknown overlap policy {policy!r}; allowed: {', '.join(OVERLAP_POLICIES)}",
            field="overlap_policy",
        )
