"""Schedule preview: the next fires of an expression as plain JSON-ready objects.

One function serves both the ``jobsched preview`` command and the API's schedule preview, so both
show exactly what the dispatcher will do.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from jobsched.core.schedules import parse_schedule
from jobsched.core.timeline import Fire, next_fires


def preview(
    expression: str,
    timezone: str = "UTC",
    *,
    after: datetime,
    count: int = 5,
    dst_gap: str = "shift",
    dst_overlap: str = "first",
    anchor: datetime | None = None,
) -> list[dict[str, Any]]:
    """The next ``count`` fires strictly after ``after`` as ``{"at", "local", "note"}`` objects.

    ``at`` is UTC ISO 8601 ending in ``Z``; ``local`` is ISO 8601 in the schedule's zone with its
    offset; ``note`` is None or one of ``dst_gap_shifted``, ``dst_overlap_first``,
    ``dst_overlap_second``. Raises ValidationError for any bad input.
    """
    schedule = parse_schedule(expression, timezone, dst_gap=dst_gap, dst_overlap=dst_overlap, anchor=anchor)
    return [fire_to_dict(fire) for fire in next_fires(schedule, after, count)]


def fire_to_dict(fire: Fire) -> dict[str, Any]:
    """The JSON shape of one fire."""
    at = fire.at.astimezone(UTC).replace(tzinfo=None).isoformat()
    return {"at": f"{at}Z", "local": fire.local.isoformat(), "note": fire.note}
