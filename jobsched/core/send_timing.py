"""When a delayed run message surfaces, and which ``DelaySeconds`` to give it (pure; decision 0032).

SQS's ``DelaySeconds`` is a whole number of seconds counted from the instant SQS accepts the message,
so a message sent at ``t`` surfaces at ``t + delay``: its sub-second position is the send's, whatever
the delay. Rounded down (:func:`jobsched.core.messages.delay_seconds`), a run due on a whole second and
sent at ``S + f`` surfaces ``1 - f`` early and its worker sleeps that out (billed Lambda duration);
rounded up it surfaces ``f`` late.

:func:`chosen_delay` takes the up-rounded delay when it lands the message at most ``late_margin``
after its due instant, and the down-rounded one otherwise (early, the worker waits). A dispatcher tick
that sends just after a whole second therefore lands every whole-second run at its instant plus at
most the margin; :func:`alignment_wait` says how long to wait for that boundary, and only when waiting
turns a message that would surface early into one that surfaces on time.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import datetime, timedelta

from jobsched.core.messages import MAX_SQS_DELAY_SECONDS

#: Default bound on how late (after its due instant) an aligned send may land a message, in seconds.
DEFAULT_LATE_MARGIN_SECONDS = 0.1
#: Default cap on what one dispatcher tick sleeps in all for alignment, in seconds.
DEFAULT_ALIGN_BUDGET_SECONDS = 5.0
#: Half a microsecond (datetimes' resolution): float noise in ``up - ahead`` is not lateness.
_EPSILON = 5e-7


def chosen_delay(due_at: datetime, now: datetime, late_margin: float) -> int:
    """``DelaySeconds`` for a message due at ``due_at`` sent at ``now``.

    ``ceil(due_at - now)`` when that surfaces it at most ``late_margin`` seconds after ``due_at``, else
    ``floor(due_at - now)`` (it surfaces under a second early; the worker waits out the rest); 0 for a
    run already due; capped at SQS's 900 s (a later run is re-delayed by the worker). With
    ``late_margin`` 0 this is exactly the floor of :func:`jobsched.core.messages.delay_seconds` except
    on an exact whole second, where both agree.
    """
    ahead = (due_at - now).total_seconds()
    if ahead <= 0:
        return 0
    up = math.ceil(ahead)
    delay = up if up - ahead <= late_margin + _EPSILON else math.floor(ahead)
    return min(MAX_SQS_DELAY_SECONDS, delay)


def surfaces_at(sent_at: datetime, delay: int) -> datetime:
    """When a message sent at ``sent_at`` with ``DelaySeconds = delay`` becomes visible."""
    return sent_at + timedelta(seconds=delay)


def early_seconds(due_at: datetime, sent_at: datetime, delay: int) -> float:
    """How long before ``due_at`` the message surfaces (0 when at or after it): the worker's wait."""
    return max(0.0, (due_at - surfaces_at(sent_at, delay)).total_seconds())


def late_seconds(due_at: datetime, sent_at: datetime, delay: int) -> float:
    """How long after ``due_at`` the message surfaces (0 when at or before it)."""
    return max(0.0, (surfaces_at(sent_at, delay) - due_at).total_seconds())


def next_whole_second(now: datetime) -> datetime:
    """The first whole second strictly after ``now``."""
    return now.replace(microsecond=0) + timedelta(seconds=1)


def alignment_wait(dues: Iterable[datetime], now: datetime, late_margin: float) -> float:
    """Seconds to wait before sending messages due at ``dues`` (0: send now).

    The wait is up to the next whole second, and only worth it when at least one message that
    :func:`chosen_delay` would land early at ``now`` lands on time (early 0) when sent at that second.
    Messages already due, beyond the 900 s cap, or due at a fraction of a second that no whole-second
    send can hit (jitter) never cause a wait.
    """
    target = next_whole_second(now)
    for due_at in dues:
        if due_at <= now or (due_at - target).total_seconds() > MAX_SQS_DELAY_SECONDS:
            continue
        if early_seconds(due_at, now, chosen_delay(due_at, now, late_margin)) == 0:
            continue
        if early_seconds(due_at, target, chosen_delay(due_at, target, late_margin)) == 0:
            return (target - now).total_seconds()
    return 0.0
