"""A run's progress: what a handler may report, and how a stored progress is shown. Pure.

Two writers store ``progress`` on a run item: the chunk runner (``{"done", "total"}`` chunks, total
null until the plan step ran) and the worker's heartbeat, with what a plain handler passed to
``ctx.heartbeat(progress)``. A handler's progress is checked where it is given
(:func:`handler_progress`: the handler gets a :class:`ValidationError` naming what to fix), so the
API never meets a value it cannot show; :func:`progress_view` still reads anything stored (a run
written before the check) without raising: what is not a progress is shown as none, never as 0.
"""

from __future__ import annotations

import re
from typing import Any

from jobsched.core.errors import ValidationError

#: The unit of a chunked run's progress; a plain handler may not claim it.
CHUNKS = "chunks"
#: The unit of a handler's progress when it names none.
DEFAULT_UNIT = "steps"
_UNIT = re.compile(r"^[a-z][a-z0-9 _-]{0,23}$")
_KEYS = frozenset({"done", "total", "unit"})
_SHAPE = (
    'progress is {"done": int >= 0, "total": int >= done or null, "unit": "rows"} (total and unit optional)'
)


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def handler_progress(value: Any) -> dict[str, Any]:
    """The progress a plain handler reported, as stored: ``{"done", "total", "unit"}``. Raises
    :class:`ValidationError` (field ``progress``) for anything else, saying what is allowed."""
    if not isinstance(value, dict):
        raise ValidationError(f"{_SHAPE}, got {type(value).__name__} {value!r:.60}", field="progress")
    extra = sorted(str(k) for k in value if k not in _KEYS)
    if extra:
        raise ValidationError(f"{_SHAPE}; unknown key(s): {', '.join(extra)}", field="progress")
    done, total = value.get("done"), value.get("total")
    if not _count(done):
        raise ValidationError(f"{_SHAPE}; done is {done!r}", field="progress.done")
    if total is not None and (not _count(total) or total < done):
        raise ValidationError(f"{_SHAPE}; total is {total!r} with done {done}", field="progress.total")
    unit = value.get("unit", DEFAULT_UNIT)
    if not isinstance(unit, str) or not _UNIT.match(unit) or unit == CHUNKS:
        raise ValidationError(
            f"{_SHAPE}; unit must be 1-24 lower-case letters, digits, spaces, - or _, "
            f"starting with a letter, and not {CHUNKS!r} (chunked runs' unit), got {unit!r:.40}",
            field="progress.unit",
        )
    return {"done": done, "total": total, "unit": unit}


def progress_view(stored: Any) -> dict[str, Any] | None:
    """A stored progress as the API shows it, ``{"done", "total", "unit"}`` (numbers as plain
    integers); None when nothing, or nothing that is a progress, is stored. Never raises."""
    if not isinstance(stored, dict) or "done" not in stored:
        return None
    done, total, unit = stored.get("done", 0), stored.get("total"), stored.get("unit", CHUNKS)
    try:
        done_n = int(done)
        total_n = None if total is None else int(total)
    except (TypeError, ValueError, OverflowError):
        return None
    if isinstance(done, bool) or isinstance(total, bool) or done_n < 0:
        return None
    if done_n != done or (total_n is not None and total_n != total) or not isinstance(unit, str):
        return None  # a fraction, a string or a bool is not a count: shown as no progress, not as 0
    return {"done": done_n, "total": total_n, "unit": unit}
