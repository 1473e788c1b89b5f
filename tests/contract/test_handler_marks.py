"""The HandlerMarks port's contract (draining marks of handler versions and forced deploy-checks,
decision 0049): the in-memory fake (jobsched.testing.InMemoryHandlerMarks) and the Leases-table
adapter (jobsched.aws.handler_store.HandlerMarksStore) on the fake table and on moto answer alike."""

from __future__ import annotations

import json

import pytest

from jobsched.aws.handler_store import HandlerMarksStore
from jobsched.ports.handlers import MAX_DEPLOY_CHECK_BYTES, MAX_DEPLOY_CHECKS, MAX_DEPLOY_CHECKS_BYTES
from jobsched.testing import InMemoryHandlerMarks
from tests.aws.conftest import T0


@pytest.fixture(params=["fake", "table"])
def marks(request, backend):
    """The fake, or the adapter over the backend's table (the in-memory one, or DynamoDB on moto)."""
    if request.param == "fake":
        if backend.kind == "moto":
            pytest.skip("the fake keeps no table: run once")
        return InMemoryHandlerMarks()
    return HandlerMarksStore(backend.table, backend.settings.leases_table)


def test_a_version_marked_draining_is_listed_until_unmarked(marks):
    # Given nothing marked
    assert marks.draining() == set()
    # When two versions are marked (one twice) and one is unmarked
    marks.mark_draining("report", 1, now=T0, by="ops")
    marks.mark_draining("report", 1, now=T0, by="someone else")
    marks.mark_draining("export.csv", 3, now=T0, by="ops")
    assert marks.unmark_draining("export.csv", 3) is True
    # Then the one left is listed, and unmarking what is not marked says so
    assert marks.draining() == {("report", 1)}
    assert marks.unmark_draining("export.csv", 3) is False


def test_deploy_checks_are_listed_newest_first_and_the_oldest_dropped_beyond_the_cap(marks):
    # When more records than are kept are written
    for i in range(MAX_DEPLOY_CHECKS + 2):
        record = {"forced": True, "code_version": f"c{i}", "problems": [{"name": "report", "version": 1}]}
        stored = marks.record_deploy_check(
            {**record, "recorded_at": "2026-01-01T00:00:00.000Z", "recorded_by": "ops"}
        )
        assert stored["code_version"] == f"c{i}"
    # Then the newest are listed first, the two oldest are gone, and what was stored comes back as sent
    listed = marks.deploy_checks()
    assert len(listed) == MAX_DEPLOY_CHECKS
    assert [c["code_version"] for c in listed[:2]] == [f"c{MAX_DEPLOY_CHECKS + 1}", f"c{MAX_DEPLOY_CHECKS}"]
    assert listed[-1]["code_version"] == "c2"
    assert listed[0]["problems"] == [{"name": "report", "version": 1}]


def test_large_deploy_checks_are_kept_while_together_they_fit_one_item(marks):
    # Given records of the largest size a request may send (64 KiB of problems each)
    problems = [{"name": "report", "version": 1, "detail": "x" * (MAX_DEPLOY_CHECK_BYTES // 2 - 100)}] * 2
    # When ten are recorded (on DynamoDB they are one item, which holds at most 400 KB)
    for i in range(10):
        marks.record_deploy_check({"forced": True, "code_version": f"c{i}", "problems": problems})
    # Then every write succeeded, and the newest that fit in MAX_DEPLOY_CHECKS_BYTES are listed
    listed = [c["code_version"] for c in marks.deploy_checks()]
    assert listed == [f"c{i}" for i in range(9, 9 - len(listed), -1)]
    assert 4 <= len(listed) < 10
    assert sum(len(json.dumps(c)) for c in marks.deploy_checks()) <= MAX_DEPLOY_CHECKS_BYTES
