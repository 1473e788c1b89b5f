"""``GET /schedules/preview``: the next fire times of a schedule, without creating a job.

The time core does the work (:func:`jobsched.core.preview.preview`); this route only reads the
query, supplies "now" from the injected clock and maps the result.
"""

from typing import Annotated

from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Query

from jobsched.api.deps import ClockDep
from jobsched.api.schemas import DstGap, DstOverlap, FireOut, Instant, PreviewOut
from jobsched.core.errors import ValidationError
from jobsched.core.preview import preview

MAX_PREVIEW_COUNT = 100

router = Router()


@router.get("/schedules/preview", tags=["schedules"], summary="Next fire times of a schedule")
def preview_schedule(
    clock: ClockDep,
    schedule: Annotated[str, Query(min_length=1, max_length=256, description="the schedule expression")],
    timezone: Annotated[str, Query(min_length=1, max_length=64)] = "UTC",
    count: Annotated[int, Query(ge=1, le=MAX_PREVIEW_COUNT)] = 5,
    dst_gap: Annotated[DstGap, Query()] = "shift",
    dst_overlap: Annotated[DstOverlap, Query()] = "first",
    after: Annotated[
        Instant | None, Query(description="start after this instant (default: now), with an offset or Z")
    ] = None,
) -> PreviewOut:
    if after is not None and (after.tzinfo is None or after.utcoffset() is None):
        raise ValidationError("after: needs a UTC offset or Z (e.g. 2026-11-01T00:00:00Z)", field="after")
    fire_times = preview(
        schedule,
        timezone,
        after=after or clock.now(),
        count=count,
        dst_gap=dst_gap,
        dst_overlap=dst_overlap,
    )
    return PreviewOut(schedule=schedule, timezone=timezone, fire_times=[FireOut(**f) for f in fire_times])
