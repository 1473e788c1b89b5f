"""The sweeper's rules: when a run that should be moving is stranded, and what rescues it. Pure.

A run item is judged from its own timestamps (plain values, as stored), never from a clock read.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Literal

from jobsched.core.models import RunState, from_iso

#: ``resend``: the run waits for a message that may be lost (send it again); ``reclaim``: its worker's
#: lease expired long ago (send the next delivery so another worker takes it over).
Rescue = Literal["resend", "reclaim"]


def stranded_kind(item: dict[str, Any], now: datetime, grace: timedelta) -> Rescue | None:
    """``resend`` | ``reclaim`` | None for a run item at ``now``: stranded once its due instant, retry
    instant or lease end is more than ``grace`` past, unless it was re-sent within ``grace``."""
    limit = now - grace
    swept = item.get("swept_at")
    if swept and from_iso(swept) > limit:
        return None  # re-sent recently: give that message time
    waiting = item.get("waiting_until")
    if waiting and from_iso(waiting) > limit:
        return None  # its delivery waits for a concurrency slot or a rate booking (core/limits.py)
    state = item.get("state")
    if state == RunState.QUEUED and from_iso(item["due_at"]) < limit:
        return "resend"
    if state == RunState.RETRYING and item.get("retry_at") and from_iso(item["retry_at"]) < limit:
        return "resend"
    if state == RunState.RUNNING and item.get("lease_until") and from_iso(item["lease_until"]) < limit:
        return "reclaim"
    return None
