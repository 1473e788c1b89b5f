"""Fair shares of a pool's invocations (issue 31 §7, decision 0057): pure arithmetic, no I/O.

A pool (a Lambda queue's event source mapping, an embedded poller) has ``slots`` invocations a tenant
may hold at most: today's ceiling (``max_concurrency``). With a fair share ``share`` (0 < share <= 1)
the pool's ceiling becomes :func:`pool_ceiling` = ``ceil(slots / share)``: a tenant alone still gets
its ``slots``, and the rest is head-room only other tenants' runs use. ``share`` 1 = no head-room
(the gate is off). When the capacity function raises or lowers the ceiling (decision 0055), a
tenant's slots follow it: :func:`tenant_slots_at` = ``max(slots, floor(ceiling * share))``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from jobsched.core.errors import ValidationError

#: The share the benchmarks measure and decision 0057 chose: 20 slots -> a ceiling of 25, 5 of
#: head-room.
MEASURED_FAIR_SHARE = 0.8
#: The deployment's default fair share (``fair_share``, ``jobsched dev --fair-share``, the embedded
#: mode's ``LocalConfig.fair_share``): on, at the measured share. A tenant's slots follow the capacity
#: function's raises (:func:`tenant_slots_at`), so a tenant alone keeps pre-warming and the scaling
#: on age (decision 0057, "Why on by default"). 1 turns it off.
DEFAULT_FAIR_SHARE = MEASURED_FAIR_SHARE
#: The smallest share accepted (a ceiling at most 10 times a tenant's slots).
MIN_FAIR_SHARE = 0.1


def check_share(share: float, field: str = "fair_share") -> float:
    """``share`` if it is in [MIN_FAIR_SHARE, 1], else a ValidationError naming ``field``."""
    if not isinstance(share, int | float) or math.isnan(share) or not MIN_FAIR_SHARE <= share <= 1:
        raise ValidationError(f"{field} must be a number from {MIN_FAIR_SHARE} to 1 (1 = off), got {share!r}")
    return float(share)


def pool_ceiling(slots: int, share: float) -> int:
    """The pool's ceiling for tenants holding at most ``slots`` each: ``ceil(slots / share)``."""
    return max(slots, math.ceil(round(slots / check_share(share), 9)))


def tenant_slots_at(slots: int, share: float, ceiling: int | None) -> int:
    """The invocations one tenant may hold of a pool whose ceiling in force is ``ceiling`` (None: the
    base, ``pool_ceiling(slots, share)``): ``max(slots, floor(ceiling * share))``. At the base ceiling
    ``ceil(slots / share)`` this is ``slots`` exactly (``ceil(slots / share) * share`` is below
    ``slots + 1``); a raised ceiling gives a tenant alone all of the raise but its head-room
    ``ceiling - floor(ceiling * share)``; a lowered one never takes a tenant below ``slots``."""
    if ceiling is None:
        return slots
    return max(slots, math.floor(round(ceiling * check_share(share), 9)))


def live(holders: Mapping[str, int], now_ms: int) -> set[str]:
    """The holders whose lease (epoch ms) has not ended at ``now_ms``."""
    return {name for name, until in holders.items() if int(until) > now_ms}


def holds(registered: Iterable[str], in_process: Iterable[str], owner: str) -> int:
    """How many invocations other than ``owner`` hold slots of a tenant: the registered ones and the
    ones this process runs (registered or not yet), each counted once."""
    return len((set(registered) | set(in_process)) - {owner})


def parse_tenant_slots(raw: str | None, field: str) -> dict[str, int]:
    """``"default=20,low=5"`` -> ``{"default": 20, "low": 5}``; empty or None -> ``{}``."""
    slots: dict[str, int] = {}
    for part in (raw or "").split(","):
        if not part.strip():
            continue
        name, _, value = part.partition("=")
        try:
            count = int(value)
        except ValueError:
            raise ValidationError(f"{field} must be queue=slots pairs, got {raw!r}") from None
        if not name.strip() or count < 1:
            raise ValidationError(f"{field} must be queue=slots pairs with slots >= 1, got {raw!r}")
        slots[name.strip()] = count
    return slots


def format_tenant_slots(slots: Mapping[str, int]) -> str:
    return ",".join(f"{name}={count}" for name, count in sorted(slots.items()))
