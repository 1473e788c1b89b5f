"""Data model: ids, item round trips, the run state machine, the message body, the clock."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

import pytest

from jobsched.core.clock import FakeClock
from jobsched.core.errors import ConflictError, ValidationError
from jobsched.core.messages import MAX_PAYLOAD_BYTES, RunMessage, delay_seconds, payload_size
from jobsched.core.models import (
    Attempt,
    Job,
    JobState,
    RetrySpec,
    Run,
    RunState,
    Trigger,
    check_transition,
    from_iso,
    make_run_id,
    parse_run_id,
    partition_for,
    partition_key,
    shard_for,
    tenant_sort_for,
    to_iso,
)

T = datetime(2026, 3, 29, 1, 30, 0, 250000, tzinfo=UTC)


def _job(**overrides) -> Job:
    base = dict(
        id="job_abc",
        tenant="acme",
        name="nightly",
        schedule="0 2 * * *",
        timezone="Europe/Berlin",
        target={"handler": "echo"},
        payload={"k": [1, 2.5, "x"]},
        created_at=T,
        updated_at=T,
        next_due_at=T + timedelta(hours=1),
    )
    base.update(overrides)
    return Job(**base)


def test_iso_instants_are_utc_with_z_and_round_trip():
    # Given an instant with a +02:00 offset / When formatted and parsed / Then UTC 'Z' text, same instant
    local = datetime(2026, 6, 1, 12, 0, 0, 5000, tzinfo=timezone(timedelta(hours=2)))
    assert to_iso(local) == "2026-06-01T10:00:00.005Z"
    assert from_iso(to_iso(local)) == local


def test_naive_datetimes_are_rejected():
    with pytest.raises(ValidationError, match="timezone-aware"):
        to_iso(datetime(2026, 1, 1))


def test_scheduled_run_id_is_deterministic_and_parses_back_to_the_primary_key():
    # Given one occurrence / When its id is made twice / Then the same URL-safe id, parsable to (job, key)
    first = make_run_id("job_abc", T)
    assert first == make_run_id("job_abc", T.astimezone(timezone(timedelta(hours=5))))
    assert first == "job_abc.20260329T013000.250Z"
    assert parse_run_id(first) == ("job_abc", "20260329T013000.250Z")


def test_catchup_shares_the_scheduled_id_but_manual_runs_are_distinct():
    assert make_run_id("j1", T, Trigger.CATCHUP) == make_run_id("j1", T)
    manual = make_run_id("j1", T, Trigger.MANUAL, nonce="n1")
    assert manual != make_run_id("j1", T)
    assert parse_run_id(manual) == ("j1", "20260329T013000.250Z.mn1")


def test_manual_run_without_nonce_is_refused():
    with pytest.raises(ValidationError, match="nonce"):
        make_run_id("j1", T, Trigger.MANUAL)


@pytest.mark.parametrize("bad", ["", "a.b", "job/1", "x" * 65])
def test_bad_job_ids_are_refused(bad):
    with pytest.raises(ValidationError):
        make_run_id(bad, T)


@pytest.mark.parametrize("bad", ["j1", "j1.2026", "j1.20260329T013000.250Z.zz", "../etc"])
def test_malformed_run_ids_do_not_parse(bad):
    with pytest.raises(ValidationError):
        parse_run_id(bad)


def test_shard_is_stable_and_in_range():
    assert shard_for("job_abc", 8) == shard_for("job_abc", 8)
    assert {shard_for(f"job{i}", 4) for i in range(100)} == {0, 1, 2, 3}


def test_job_item_round_trips_and_carries_due_index_keys_while_active():
    job = _job()
    item = job.to_item()
    assert item["due_shard"] == partition_key(partition_for(job.id))
    assert item["due_at"] == int((T + timedelta(hours=1)).timestamp() * 1000)
    assert Job.from_item(item) == job


def test_paused_job_item_has_no_due_index_keys():
    item = _job(state=JobState.PAUSED, paused_note="maintenance").to_item()
    assert "due_shard" not in item and "due_at" not in item
    assert item["paused_note"] == "maintenance"


def test_run_item_round_trips_and_omits_empty_attributes():
    run = Run(
        id=make_run_id("job_abc", T),
        job_id="job_abc",
        tenant="acme",
        scheduled_at=T,
        due_at=T + timedelta(seconds=3),
        created_at=T,
    )
    item = run.to_item()
    assert item["tenant"] == "acme" and "tenant_sort" not in item  # no tenant index key (ADR 0004)
    assert tenant_sort_for(run.run_key, run.job_id) == "20260329T013000.250Z#job_abc"  # its feed entry
    assert "attempts" not in item and "cancel_requested" not in item and "dl_tenant" not in item
    assert Run.from_item(item) == run


def test_dead_lettered_run_carries_the_sparse_dead_letter_keys():
    run = Run(
        id=make_run_id("job_abc", T),
        job_id="job_abc",
        tenant="acme",
        state=RunState.FAILED,
        scheduled_at=T,
        due_at=T,
        created_at=T,
        attempts=[Attempt(attempt=1, started_at=T, finished_at=T, outcome="failed", error="boom")],
        dead_lettered_at=T,
    )
    item = run.to_item()
    assert item["dl_tenant"] == "acme" and item["dl_at"] == to_iso(T)
    assert Run.from_item(item).attempts[0].error == "boom"


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("queued", "running"),
        ("running", "succeeded"),
        ("running", "retrying"),
        ("retrying", "running"),
        ("queued", "skipped"),
        ("queued", "cancelled"),
        ("failed", "queued"),
        ("running", "failed"),
    ],
)
def test_allowed_transitions_pass(old, new):
    check_transition(old, new)


@pytest.mark.parametrize(
    ("old", "new"),
    [("succeeded", "running"), ("skipped", "queued"), ("queued", "succeeded"), ("cancelled", "queued")],
)
def test_illegal_transitions_raise_conflict(old, new):
    with pytest.raises(ConflictError, match=f"a {old} run cannot become {new}"):
        check_transition(old, new)


def test_retry_spec_rejects_out_of_range_values():
    with pytest.raises(ValidationError, match="max_attempts"):
        RetrySpec.from_dict({"max_attempts": 0})


def test_run_message_round_trips_through_json():
    msg = RunMessage(
        run_id=make_run_id("job_abc", T),
        job_id="job_abc",
        tenant="acme",
        attempt=1,
        scheduled_at=T,
        due_at=T,
        target={"handler": "echo"},
        payload={"a": 1},
        retry=RetrySpec(5, 1.0, 60.0),
        priority="high",
    )
    assert RunMessage.from_json(msg.to_json()) == msg


def test_run_message_carries_its_payload_inline_and_names_no_s3_reference():
    # Given payloads are at most 64 KiB and always travel in the message (docs/decisions/0011)
    msg = RunMessage(
        run_id=make_run_id("job_abc", T),
        job_id="job_abc",
        tenant="acme",
        attempt=1,
        scheduled_at=T,
        due_at=T,
        target={"handler": "echo"},
        payload={"blob": "x" * (MAX_PAYLOAD_BYTES - 20)},
    )
    # When it is serialised / Then the payload is inside and there is no payload_ref field
    body = json.loads(msg.to_json())
    assert body["payload"] == msg.payload and "payload_ref" not in body
    assert payload_size(msg.payload) <= MAX_PAYLOAD_BYTES


def test_run_message_with_foreign_run_id_is_poison():
    body = RunMessage(
        run_id=make_run_id("job_abc", T),
        job_id="job_abc",
        tenant="acme",
        attempt=1,
        scheduled_at=T,
        due_at=T,
        target={"handler": "echo"},
    ).to_dict() | {"job_id": "other"}
    import json

    with pytest.raises(ValidationError, match="does not belong"):
        RunMessage.from_json(json.dumps(body))


@pytest.mark.parametrize(
    ("seconds", "expected"), [(-5, 0), (0, 0), (0.2, 0), (0.999, 0), (1.5, 1), (12, 12), (5000, 900)]
)
def test_delay_seconds_rounds_down_and_clamps(seconds, expected):
    # The message may surface up to 1 s early; the worker waits out the rest
    # (tests/services/test_worker_wait.py).
    assert delay_seconds(T + timedelta(seconds=seconds), T) == expected


def test_fake_clock_moves_only_when_told():
    clock = FakeClock(T)
    assert clock.now() == T
    assert clock.advance(seconds=90) == T + timedelta(seconds=90)
    with pytest.raises(ValueError):
        clock.advance(-1)


def test_a_run_id_before_the_year_1000_has_a_four_digit_year_and_parses_back():
    """Given an instant in the year 174 (a backfill may reach back there) / When its run id and its
    ISO string are made / Then the year has 4 digits (strftime's %Y gave 174: the run id was refused
    by run_id_of, a 422 on the backfill) and the run id parses back to the instant."""
    from datetime import UTC, datetime

    from jobsched.api.schemas import iso_z
    from jobsched.core.ids import make_run_id, parse_run_id, scheduled_at_from_run_key
    from jobsched.core.instants import from_iso, to_iso

    instant = datetime(174, 1, 1, 0, 0, 16, tzinfo=UTC)
    run_id = make_run_id("job1", instant, "backfill")
    assert run_id == "job1.01740101T000016.000Z.b"
    assert scheduled_at_from_run_key(parse_run_id(run_id)[1]) == instant
    assert to_iso(instant) == iso_z(instant) == "0174-01-01T00:00:16.000Z"
    assert from_iso(to_iso(instant)) == instant
