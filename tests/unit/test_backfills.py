"""The pure part of asynchronous backfills (jobsched/core/backfills.py): ids, slices, the record's
progress, the message; and what the DLQ consumer does with a backfill message."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from jobsched.core.backfills import (
    SLICE_SIZE,
    Backfill,
    BackfillMessage,
    BackfillState,
    new_backfill_id,
)
from jobsched.core.errors import ValidationError
from jobsched.services.dlq_consumer import DlqConsumer

T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)


def record(planned: int = 250, **fields) -> Backfill:
    return Backfill(
        id="b" + "0" * 24,
        job_id="j1",
        tenant="acme",
        start=T0 - timedelta(days=planned),
        end=T0,
        planned=planned,
        created_at=T0,
        updated_at=T0,
        **fields,
    )


def test_a_key_names_one_backfill_per_tenant_and_job():
    """Given the same key / Then the same id for the same tenant and job, another for another job or
    tenant; without a key every id is new."""
    assert new_backfill_id("acme", "j1", "k") == new_backfill_id("acme", "j1", "k")
    assert new_backfill_id("acme", "j1", "k") != new_backfill_id("acme", "j2", "k")
    assert new_backfill_id("acme", "j1", "k") != new_backfill_id("globex", "j1", "k")
    assert new_backfill_id("acme", "j1", None) != new_backfill_id("acme", "j1", None)
    assert len(new_backfill_id("acme", "j1", "k")) == 25


@pytest.mark.parametrize(
    ("planned", "slices"),
    [
        (101, [(0, 100), (100, 101)]),
        (250, [(0, 100), (100, 200), (200, 250)]),
        (300, [(0, 100), (100, 200), (200, 300)]),
    ],
)
def test_slices_cover_every_occurrence_once_in_order(planned, slices):
    """Given a record of ``planned`` occurrences / When each slice is recorded in turn / Then the slices
    are the ``SLICE_SIZE`` windows in order and the record ends succeeded with the counts summed."""
    current, seen = record(planned), []
    while (bounds := current.next_slice()) is not None:
        seen.append(bounds)
        size = bounds[1] - bounds[0]
        current = current.after_slice(size - 1, 1, size, T0 + timedelta(seconds=len(seen)))
    assert seen == slices and SLICE_SIZE == 100
    assert current.state is BackfillState.SUCCEEDED and current.done == planned
    assert (current.created, current.existing, current.sent) == (planned - len(slices), len(slices), planned)
    assert current.finished_at == T0 + timedelta(seconds=len(slices))


def test_a_stopped_backfill_has_no_slice_left():
    assert record(state=BackfillState.FAILED).next_slice() is None
    with pytest.raises(ValueError):
        record(planned=100, done=100).after_slice(0, 0, 0, T0)


def test_the_record_round_trips_through_its_item():
    """Then every field survives ``to_item``/``from_item``, under the job's backfill partition."""
    original = record(done=100, created=90, existing=10, sent=100, error=None, expires_at=1234)
    item = original.to_item()
    assert item["job_id"] == "backfill#j1" and item["run_key"] == original.id
    assert Backfill.from_item(item) == original


def test_the_message_is_recognised_and_parsed():
    msg = BackfillMessage("acme", "j1", "b" + "1" * 24)
    body = msg.to_json()
    assert BackfillMessage.accepts(body) and BackfillMessage.from_json(body) == msg
    assert not BackfillMessage.accepts('{"run_id":"j1.20260302T120000.000Z","attempt":1}')
    with pytest.raises(ValidationError):
        BackfillMessage.from_json('{"kind":"backfill"}')


def test_the_dlq_consumer_drops_a_backfill_message_as_unidentified():
    """Given a backfill message SQS gave up on / When the DLQ consumer reads it / Then it names no run:
    dropped as unidentifiable (docs/api.md: the backfill is resumed by repeating the request)."""
    consumer = DlqConsumer(attempts=None)  # type: ignore[arg-type]  # never reached on this path
    outcome = consumer.process(BackfillMessage("acme", "j1", "b" + "1" * 24).to_json(), T0)
    assert outcome.status == "unidentified"
