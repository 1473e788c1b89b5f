"""The preview objects shared by the CLI and the API."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from jobsched.core.errors import ValidationError
from jobsched.core.preview import preview


def test_preview_returns_utc_local_and_note():
    # Given 02:30 daily in New York, just before the spring-forward day
    # When previewed
    fires = preview("30 2 * * *", "America/New_York", after=datetime(2026, 3, 7, 12, tzinfo=UTC), count=2)
    # Then each object has UTC with Z, local with offset, and the DST note
    assert fires == [
        {"at": "2026-03-08T07:00:00Z", "local": "2026-03-08T03:00:00-04:00", "note": "dst_gap_shifted"},
        {"at": "2026-03-09T06:30:00Z", "local": "2026-03-09T02:30:00-04:00", "note": None},
    ]


def test_preview_passes_the_overlap_policy():
    fires = preview(
        "30 1 * * *",
        "Europe/London",
        after=datetime(2026, 10, 24, 12, tzinfo=UTC),
        count=2,
        dst_overlap="both",
    )
    assert [f["note"] for f in fires] == ["dst_overlap_first", "dst_overlap_second"]
    assert [f["local"] for f in fires] == ["2026-10-25T01:30:00+01:00", "2026-10-25T01:30:00+00:00"]


def test_preview_of_a_rate_uses_the_anchor():
    anchor = datetime(2026, 1, 1, 0, 0, 10, tzinfo=UTC)
    fires = preview("rate(1 minute)", after=datetime(2026, 1, 1, tzinfo=UTC), count=1, anchor=anchor)
    assert fires[0]["at"] == "2026-01-01T00:00:10Z"


def test_preview_rejects_bad_input_with_validation_error():
    with pytest.raises(ValidationError, match="day-of-week field '8' is out of range 0-7"):
        preview("30 2 * * 8", after=datetime(2026, 1, 1, tzinfo=UTC))
