"""The deadline rules (jobsched.core.deadlines), as tables of stored attributes and instants."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from jobsched.core.deadlines import (
    MAX_DEADLINE_SECONDS,
    deadline_for,
    deadline_notification_of,
    marker_key,
    overdue_occurrence,
    run_missed,
    validate_deadline,
)
from jobsched.core.errors import ValidationError
from jobsched.core.models import Job, JobState, Trigger

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
DEADLINE = "2026-12-01T09:10:00.000Z"


def _at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def _job(deadline: int = 600, **kw) -> Job:
    return Job(
        id="j1",
        tenant="acme",
        name="n",
        schedule="0 * * * *",
        deadline_seconds=deadline,
        created_at=T0,
        updated_at=T0,
        **kw,
    )


@pytest.mark.parametrize(
    ("item", "now", "missed"),
    [
        ({"state": "queued"}, _at(9), False),  # before its deadline
        ({"state": "queued"}, _at(11), True),
        ({"state": "running"}, _at(11), True),
        ({"state": "retrying"}, _at(11), True),
        ({"state": "succeeded", "finished_at": "2026-12-01T09:05:00.000Z"}, _at(11), False),
        ({"state": "succeeded", "finished_at": "2026-12-01T09:12:00.000Z"}, _at(13), True),
        ({"state": "failed", "finished_at": "2026-12-01T09:02:00.000Z"}, _at(11), False),  # a dead letter
        ({"state": "failed", "finished_at": "2026-12-01T09:11:00.000Z"}, _at(12), True),
        ({"state": "cancelled", "finished_at": "2026-12-01T09:11:00.000Z"}, _at(12), True),
        ({"state": "skipped", "finished_at": "2026-12-01T09:00:00.000Z"}, _at(12), False),
        ({"state": "queued", "deadline_missed_at": "2026-12-01T09:11:00.000Z"}, _at(12), False),  # done
        ({"state": "queued", "replays": [{"action": "replay"}]}, _at(12), False),  # an operator's now
    ],
)
def test_a_run_missed_its_deadline_when_it_had_not_ended_by_then(item, now, missed):
    assert run_missed({"deadline_at": DEADLINE} | item, now) is missed


def test_a_run_without_a_deadline_never_misses():
    assert run_missed({"state": "queued"}, _at(1000)) is False


@pytest.mark.parametrize(
    ("trigger", "expected"),
    [
        (Trigger.SCHEDULE, _at(10)),
        (Trigger.CATCHUP, _at(10)),
        (Trigger.MANUAL, None),
        (Trigger.BACKFILL, None),
        (Trigger.REPLAY, None),
    ],
)
def test_only_scheduled_runs_carry_the_jobs_deadline(trigger, expected):
    assert deadline_for(_job(), T0, trigger) == expected
    assert deadline_for(_job(deadline=0), T0, trigger) is None


@pytest.mark.parametrize(
    ("next_due", "state", "now", "expected"),
    [
        (T0, JobState.ACTIVE, _at(9), None),
        (T0, JobState.ACTIVE, _at(11), T0),
        (T0, JobState.PAUSED, _at(11), None),
        (None, JobState.COMPLETED, _at(11), None),
    ],
)
def test_an_occurrence_is_overdue_once_its_deadline_passed_undispatched(next_due, state, now, expected):
    assert overdue_occurrence(_job(next_due_at=next_due, state=state), now) == expected


@pytest.mark.parametrize("value", [-1, MAX_DEADLINE_SECONDS + 1, 1.5, "60", True, None])
def test_a_bad_deadline_names_the_field(value):
    with pytest.raises(ValidationError) as err:
        validate_deadline(value)
    assert err.value.field == "deadline_seconds"


def test_the_notification_names_the_run_and_says_whether_a_run_was_made():
    marker = marker_key("j1", "20261201T090000.000Z") | {
        "tenant": "acme",
        "scheduled_at": "2026-12-01T09:00:00.000Z",
        "deadline_at": DEADLINE,
        "missed_at": "2026-12-01T09:12:00.000Z",
    }
    body = deadline_notification_of(marker)
    assert body["run_id"] == "j1.20261201T090000.000Z" and body["job_id"] == "j1"
    assert body["id"] == "j1.20261201T090000.000Z@deadline" and body["state"] is None
    assert "dispatch is behind" in body["reason"]
    assert deadline_notification_of(marker | {"run_state": "running"})["state"] == "running"
