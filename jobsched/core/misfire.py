"""Misfire planning: which overdue occurrences of a job fire now and which are recorded skipped.

An occurrence *misfired* when it is still unfired more than ``misfire_grace`` after its instant (an
outage, a pause, a backlog). Occurrences late by at most the grace are on time: they always fire and
the misfire policy never touches them. For the misfired ones the job's policy decides:

- ``run_once`` (default): fire the latest misfired occurrence, record the older ones skipped;
- ``run_all``: fire each, oldest first, but at most ``max_catchup`` of them (the most recent ones);
  older ones beyond the cap are recorded skipped;
- ``skip``: fire none, record them all skipped.

The caller passes the due occurrences as a (possibly lazy, possibly unbounded) ascending iterable.
The planner never holds more than ``max_catchup + max_individual_skips`` instants in memory and never
reads more than ``limit`` of them; the rest of a huge backlog is left for the next call, which resumes
strictly after :attr:`MisfirePlan.resume_after`. Skipped occurrences are listed one by one up to
``max_individual_skips``; beyond that the plan carries one :class:`SkipSummary` (count and range)
instead, so a month-long pause of a per-second schedule costs one record, not millions.

Pure: time is a parameter, every instant must be timezone-aware. Comparisons and lateness are computed
in UTC, so the two folds of a repeated local hour (same wall time, same ``tzinfo``) stay distinct.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from jobsched.core.errors import ValidationError

MISFIRE_POLICIES = ("run_once", "run_all", "skip")
DEFAULT_MISFIRE_POLICY = "run_once"
DEFAULT_MISFIRE_GRACE = timedelta(seconds=60)
DEFAULT_MAX_CATCHUP = 100
DEFAULT_MAX_INDIVIDUAL_SKIPS = 100
DEFAULT_PLAN_LIMIT = 20_000  # > MAX_CATCHUP_LIMIT (10,000), so any valid max_catchup makes progress
SKIP_REASON_MISFIRE = "misfire"


@dataclass(frozen=True)
class SkipSummary:
    """Stands for ``count`` skipped occurrences from ``first`` to ``last`` (both included).

    Every due instant in that range that the plan read is skipped: fired instants are always later
    than ``last``, so the range holds no fired occurrence.
    """

    count: int
    first: datetime
    last: datetime
    reason: str = SKIP_REASON_MISFIRE


@dataclass(frozen=True)
class MisfirePlan:
    """What to do with the due occurrences read by one call of :func:`plan_misfires`.

    ``fire``: occurrences to create runs for now, oldest first (catch-up ones, then on-time ones).
    ``skipped``: occurrences to record one by one as skipped runs (reason ``misfire``), oldest first.
    ``summary``: set instead of ``skipped`` when there are more than ``max_individual_skips`` of them.
    ``resume_after``: the latest occurrence this plan decided (None when it decided nothing); the
    job's marker moves there, and the next call reads due instants strictly after it.
    ``truncated``: more occurrences due at or before ``now`` remain unread (the ``limit`` was hit);
    the caller calls again (e.g. on the next tick) from ``resume_after``.
    ``next_due``: the first occurrence after ``now`` if the iterable yielded one (the planner stops
    there), so a caller passing an unbounded schedule iterator does not lose it.
    """

    fire: list[datetime]
    skipped: list[datetime]
    summary: SkipSummary | None
    resume_after: datetime | None
    truncated: bool = False
    next_due: datetime | None = None

    @property
    def skipped_count(self) -> int:
        """Number of occurrences recorded skipped, individually or in the summary."""
        return len(self.skipped) + (self.summary.count if self.summary else 0)

    @property
    def decided_count(self) -> int:
        """Number of due occurrences this plan decided (fired or skipped)."""
        return len(self.fire) + self.skipped_count


def plan_misfires(
    due: Iterable[datetime],
    now: datetime,
    *,
    policy: str = DEFAULT_MISFIRE_POLICY,
    grace: timedelta = DEFAULT_MISFIRE_GRACE,
    max_catchup: int = DEFAULT_MAX_CATCHUP,
    max_individual_skips: int = DEFAULT_MAX_INDIVIDUAL_SKIPS,
    limit: int = DEFAULT_PLAN_LIMIT,
) -> MisfirePlan:
    """Decide which of the ``due`` occurrences fire now and which are recorded skipped.

    ``due`` yields the job's unfired occurrences in strictly ascending order, starting after the last
    fired one; instants after ``now`` end the reading (the first is reported as ``next_due``).
    Every due instant read is decided exactly once: fired, skipped individually, or counted in the
    summary. Raises :class:`ValidationError` for a bad policy or bound, ``ValueError`` for a naive or
    out-of-order instant (a caller bug, not user input).
    """
    _check_aware(now, "now")
    validate_misfire(policy=policy, grace=grace, max_catchup=max_catchup)
    if max_individual_skips < 0:
        raise ValidationError(
            f"max_individual_skips must be >= 0, got {max_individual_skips}", field="max_individual_skips"
        )
    keep = {"run_once": 1, "run_all": max_catchup, "skip": 0}[policy]
    if limit <= keep:
        raise ValidationError(
            f"limit must be greater than the number of catch-up runs kept ({keep}), got {limit}",
            field="limit",
        )
    now_utc = now.astimezone(UTC)
    skips = _SkipCollector(max_individual_skips)
    late: deque[datetime] = deque()  # the newest `keep` misfired instants: fire unless displaced
    on_time: list[datetime] = []
    last_read: datetime | None = None
    last_read_utc: datetime | None = None
    truncated = False
    next_due: datetime | None = None
    for instant in due:
        _check_aware(instant, "due instant")
        instant_utc = instant.astimezone(UTC)
        if last_read_utc is not None and instant_utc <= last_read_utc:
            raise ValueError(f"due instants must be strictly ascending: {instant} after {last_read}")
        if instant_utc > now_utc:
            next_due = instant
            break
        if len(late) + len(on_time) + skips.count == limit:  # instants read so far
            truncated = True
            break
        last_read, last_read_utc = instant, instant_utc
        if now_utc - instant_utc > grace:
            late.append(instant)
            if len(late) > keep:
                skips.add(late.popleft())
        else:
            on_time.append(instant)
    if truncated and not on_time:
        # Later misfired occurrences are still unread and may displace the kept ones: leave them
        # undecided; the next call reads them again (limit > keep guarantees progress).
        fire: list[datetime] = []
        resume_after = skips.last
    else:
        fire = [*late, *on_time]
        resume_after = last_read
    skipped, summary = skips.result()
    return MisfirePlan(
        fire=fire,
        skipped=skipped,
        summary=summary,
        resume_after=resume_after,
        truncated=truncated,
        next_due=next_due,
    )


def validate_misfire(
    *, policy: str | None = None, grace: timedelta | None = None, max_catchup: int | None = None
) -> None:
    """Raise :class:`ValidationError` naming the bad value and what is allowed; check only what is given."""
    if policy is not None and policy not in MISFIRE_POLICIES:
        raise ValidationError(
            f"unknown misfire policy {policy!r}; allowed: {', '.join(MISFIRE_POLICIES)}",
            field="misfire_policy",
        )
    if grace is not None and (not isinstance(grace, timedelta) or grace < timedelta(0)):
        raise ValidationError(
            f"misfire grace must be a non-negative duration, got {grace!r}", field="misfire_grace"
        )
    if max_catchup is not None and (
        isinstance(max_catchup, bool) or not isinstance(max_catchup, int) or max_catchup < 1
    ):
        raise ValidationError(
            f"max_catchup must be an integer >= 1, got {max_catchup!r}", field="max_catchup"
        )


class _SkipCollector:
    """Collects skipped instants in order: lists the first ``max_individual`` and counts the range,
    so memory stays bounded however many are skipped."""

    def __init__(self, max_individual: int):
        self._max = max_individual
        self._items: list[datetime] = []
        self.count = 0
        self.first: datetime | None = None
        self.last: datetime | None = None

    def add(self, instant: datetime) -> None:
        self.count += 1
        if self.first is None:
            self.first = instant
        self.last = instant
        if self.count <= self._max:
            self._items.append(instant)

    def result(self) -> tuple[list[datetime], SkipSummary | None]:
        """Individual skips when they fit, else one summary for all of them (never a mix)."""
        if self.count <= self._max:
            return list(self._items), None
        assert self.first is not None and self.last is not None
        return [], SkipSummary(count=self.count, first=self.first, last=self.last)


def _check_aware(value: datetime, what: str) -> None:
    if not isinstance(value, datetime) or value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{what} must be a timezone-aware datetime, got {value!r}")
