"""Job service (on the in-memory fakes): validation writes nothing, tenants are isolated, versions are
checked, lifecycle transitions are guarded, manual and backfill runs are idempotent."""

from __future__ import annotations

from datetime import timedelta

import pytest

from jobsched.aws.jobs_store import JobExistsError
from jobsched.core.errors import (
    ConflictError,
    NotFoundError,
    PayloadTooLargeError,
    PreconditionFailedError,
    ValidationError,
)
from jobsched.core.models import JobState, RunState, Trigger, make_run_id, partition_for, partition_key
from tests.aws.conftest import T0
from tests.aws.memory import memory_aws, memory_pipeline  # noqa: F401  (this file runs on the in-memory fakes)

T1 = T0 + timedelta(minutes=1)  # just after an hourly occurrence: nothing due within the look-ahead
HOURLY = {"name": "report", "schedule": "0 * * * *", "target": {"handler": "echo"}, "payload": {"a": 1}}


def _job_count(pipeline) -> int:
    table = pipeline.env.settings.jobs_table
    return pipeline.env.clients.dynamodb.scan(TableName=table, Select="COUNT")["Count"]


@pytest.mark.parametrize(
    ("changes", "error", "message"),
    [
        ({"schedule": "61 * * * *"}, ValidationError, "minute"),
        ({"timezone": "Mars/Olympus"}, ValidationError, "not a known IANA zone"),
        ({"target": {"handler": "nope"}}, ValidationError, "unknown handler 'nope'"),
        ({"target": {"http": {"url": "ftp://x"}}}, ValidationError, "http"),
        ({"payload": {"blob": "x" * 70_000}}, PayloadTooLargeError, "65536 bytes"),
        ({"priority": "urgent"}, ValidationError, "priority"),
        ({"misfire_policy": "sometimes"}, ValidationError, "misfire"),
        ({"overlap_policy": "queue"}, ValidationError, "overlap"),
        ({"colour": "blue"}, ValidationError, "unknown job fields: colour"),
        ({"schedule": "at(2020-01-01T00:00:00)"}, ValidationError, "no occurrence"),
    ],
)
def test_bad_input_is_refused_with_a_clear_message_and_nothing_written(pipeline, changes, error, message):
    with pytest.raises(error, match=message):
        pipeline.jobs.create("acme", HOURLY | changes, T0)
    assert _job_count(pipeline) == 0


def test_create_computes_the_next_due_instant_through_the_time_core(pipeline):
    job = pipeline.jobs.create("acme", HOURLY | {"timezone": "Asia/Kolkata"}, T0)  # UTC+05:30
    assert job.next_due_at == T0 + timedelta(minutes=30)
    assert job.version == 1 and job.state is JobState.ACTIVE
    assert pipeline.jobs.jobs.dynamo.get(
        pipeline.env.settings.jobs_table, {"tenant": "acme", "job_id": job.id}
    )["due_shard"] == partition_key(partition_for(job.id))


def test_a_job_not_due_within_the_lookahead_is_not_dispatched_at_create(pipeline):
    pipeline.jobs.create("acme", HOURLY | {"schedule": "30 12 * * *"}, T0)
    assert pipeline.messages() == []


def test_another_tenants_job_answers_not_found(pipeline):
    job = pipeline.jobs.create("acme", HOURLY, T1)
    with pytest.raises(NotFoundError):
        pipeline.jobs.get("globex", job.id)
    with pytest.raises(NotFoundError):
        pipeline.jobs.pause("globex", job.id, T0)
    with pytest.raises(NotFoundError):
        pipeline.jobs.trigger("globex", job.id, T0)
    with pytest.raises(NotFoundError):
        pipeline.jobs.runs_of("globex", job.id)


def test_update_with_a_stale_version_fails_and_changes_nothing(pipeline):
    job = pipeline.jobs.create("acme", HOURLY, T1)
    pipeline.jobs.update("acme", job.id, {"payload": {"a": 2}}, 1, T0)
    with pytest.raises(PreconditionFailedError, match="version 2, not 1"):
        pipeline.jobs.update("acme", job.id, {"payload": {"a": 3}}, 1, T0)
    stored = pipeline.jobs.get("acme", job.id)
    assert stored.payload == {"a": 2} and stored.version == 2


def test_update_of_the_schedule_recomputes_the_next_due_instant(pipeline):
    job = pipeline.jobs.create("acme", HOURLY, T1)
    updated = pipeline.jobs.update("acme", job.id, {"schedule": "15 * * * *"}, job.version, T0)
    assert updated.next_due_at == T0 + timedelta(minutes=15) and updated.version == 2


def test_invalid_update_writes_nothing(pipeline):
    job = pipeline.jobs.create("acme", HOURLY, T1)
    with pytest.raises(ValidationError):
        pipeline.jobs.update("acme", job.id, {"schedule": "bogus"}, job.version, T0)
    assert pipeline.jobs.get("acme", job.id) == job


def test_pausing_a_paused_job_and_resuming_an_active_one_are_conflicts(pipeline):
    job = pipeline.jobs.create("acme", HOURLY, T1)
    with pytest.raises(ConflictError, match="only a paused job can be resumed"):
        pipeline.jobs.resume("acme", job.id, T0)
    pipeline.jobs.pause("acme", job.id, T0)
    with pytest.raises(ConflictError, match="only an active job can be paused"):
        pipeline.jobs.pause("acme", job.id, T0)


def test_resume_rejects_an_unknown_override(pipeline):
    job = pipeline.jobs.create("acme", HOURLY, T1)
    pipeline.jobs.pause("acme", job.id, T0)
    with pytest.raises(ValidationError, match="misfire policy"):
        pipeline.jobs.resume("acme", job.id, T0, misfire_policy="whenever")


def test_trigger_now_sends_a_manual_run_with_the_override_payload(pipeline):
    job = pipeline.jobs.create("acme", HOURLY, T1)
    run = pipeline.jobs.trigger("acme", job.id, T0, payload={"a": 9}, nonce="req1")
    assert run.trigger is Trigger.MANUAL and run.state is RunState.QUEUED
    [message] = pipeline.messages()
    assert message["body"]["run_id"] == run.id and message["body"]["payload"] == {"a": 9}
    assert message["delay"] == 0


def test_trigger_with_the_same_nonce_is_idempotent(pipeline):
    job = pipeline.jobs.create("acme", HOURLY, T1)
    first = pipeline.jobs.trigger("acme", job.id, T0, nonce="req1")
    second = pipeline.jobs.trigger("acme", job.id, T0, nonce="req1")
    assert first.id == second.id
    runs, _ = pipeline.jobs.runs_of("acme", job.id)
    assert [r.id for r in runs] == [first.id]


def test_backfill_creates_one_run_per_occurrence_and_is_idempotent(pipeline):
    job = pipeline.jobs.create("acme", HOURLY, T1)
    start, end = T0 - timedelta(hours=5), T0 - timedelta(hours=3)
    first = pipeline.jobs.backfill("acme", job.id, start, end, T0)
    again = pipeline.jobs.backfill("acme", job.id, start, end, T0)
    assert [r.scheduled_at for r in first] == [start, start + timedelta(hours=1), end]
    assert all(r.trigger is Trigger.BACKFILL for r in first)
    assert [r.id for r in again] == [r.id for r in first]
    assert len(pipeline.jobs.runs_of("acme", job.id)[0]) == 3


def test_backfill_of_too_wide_a_range_is_refused(pipeline):
    job = pipeline.jobs.create("acme", HOURLY | {"schedule": "* * * * *"}, T0)
    with pytest.raises(ValidationError, match="smaller ranges"):
        pipeline.jobs.backfill("acme", job.id, T0 - timedelta(days=2), T0, T0)


def test_delete_keeps_history_and_withdraws_runs_queued_ahead(pipeline):
    job = pipeline.jobs.create("acme", HOURLY | {"schedule": "* * * * *"}, T0)
    withdrawn = pipeline.jobs.delete("acme", job.id, T0 + timedelta(seconds=5))
    assert withdrawn == [make_run_id(job.id, T0 + timedelta(minutes=1))]
    with pytest.raises(NotFoundError):
        pipeline.jobs.get("acme", job.id)
    assert pipeline.dispatcher.runs.get(withdrawn[0]).skip_reason == "deleted"


def test_tenant_run_listing_reads_the_run_feed_and_sees_only_own_runs(pipeline):
    acme = pipeline.jobs.create("acme", HOURLY | {"schedule": "* * * * *"}, T0)
    pipeline.jobs.create("globex", HOURLY | {"schedule": "* * * * *"}, T0)
    runs, _ = pipeline.dispatcher.runs.list_for_tenant("acme")
    assert {r.job_id for r in runs} == {acme.id} and len(runs) == 2
    assert runs[0].scheduled_at > runs[1].scheduled_at  # newest first


def test_an_edit_racing_a_dispatcher_tick_does_not_roll_the_cursor_back(pipeline):
    # Given a per-minute job, and a tick that advances it right after the edit has read it
    from jobsched.aws.jobs_store import JobsStore

    job = pipeline.jobs.create("acme", HOURLY | {"schedule": "* * * * *"}, T0)
    store = pipeline.jobs.jobs
    ticked: list[object] = []

    class TickAfterRead(JobsStore):
        def get(self, tenant, job_id, *, consistent=True):
            read = super().get(tenant, job_id, consistent=consistent)
            if not ticked:
                ticked.append(
                    pipeline.dispatcher.dispatch_shard(
                        pipeline.dispatcher.shard_of(job.id), T0 + timedelta(minutes=3)
                    )
                )
            return read

    pipeline.jobs.jobs = TickAfterRead(store.dynamo, store.table)
    # When the payload is edited
    updated = pipeline.jobs.update("acme", job.id, {"payload": {"a": 2}}, 1, T0 + timedelta(minutes=3))
    # Then the edit is stored on top of the tick's advance, not over it
    stored = store.get("acme", job.id)
    assert ticked and stored.payload == {"a": 2} and stored.version == 2
    assert stored.next_due_at == T0 + timedelta(minutes=5) == updated.next_due_at


def test_tenant_run_listing_pages_with_a_cursor(pipeline):
    job = pipeline.jobs.create("acme", HOURLY | {"schedule": "*/20 * * * * *"}, T0)  # 12:00:00 .. 12:01:00
    first, cursor = pipeline.dispatcher.runs.list_for_tenant("acme", limit=2)
    rest, end = pipeline.dispatcher.runs.list_for_tenant("acme", limit=10, start_after=cursor)
    ids = [r.id for r in first + rest]
    assert len(first) == 2 and cursor is not None and end is None
    assert ids == [make_run_id(job.id, T0 + timedelta(seconds=s)) for s in (60, 40, 20, 0)]


def test_job_run_listing_pages_with_a_cursor(pipeline):
    job = pipeline.jobs.create("acme", HOURLY | {"schedule": "*/20 * * * * *"}, T0)
    first, cursor = pipeline.jobs.runs_of("acme", job.id, limit=3)
    rest, _ = pipeline.jobs.runs_of("acme", job.id, limit=3, cursor=cursor)
    assert [r.scheduled_at for r in first + rest] == [T0 + timedelta(seconds=s) for s in (60, 40, 20, 0)]


def test_a_failed_immediate_dispatch_leaves_the_job_to_the_next_tick(pipeline):
    # Given SQS refusing the API's sends (a queue URL that does not exist)
    from jobsched.aws.queues import RunQueues

    good = pipeline.dispatcher.queues
    broken = {k: v + "-missing" for k, v in pipeline.env.settings.queue_urls.items()}
    pipeline.dispatcher.queues = RunQueues(pipeline.env.clients.sqs, broken)
    # When a job due now is created / Then it is stored, its run exists, the job is not advanced
    job = pipeline.jobs.create("acme", HOURLY | {"schedule": "* * * * *"}, T0)
    assert job.next_due_at == T0 and pipeline.messages() == []
    # And the shard's next tick sends the run and advances the job
    pipeline.dispatcher.queues = good
    pipeline.tick(job, T0 + timedelta(seconds=30))
    assert make_run_id(job.id, T0) in [m["body"]["run_id"] for m in pipeline.messages()]
    assert pipeline.jobs.get("acme", job.id).next_due_at > T0


def _items(pipeline) -> list[str]:
    table = pipeline.env.settings.jobs_table
    return sorted(i["job_id"]["S"] for i in pipeline.env.clients.dynamodb.scan(TableName=table)["Items"])


def test_a_large_payload_round_trips_and_its_item_follows_the_job(pipeline):
    big = {"blob": "y" * 5000}
    job = pipeline.jobs.create("acme", HOURLY | {"payload": big}, T1)
    assert pipeline.jobs.get("acme", job.id).payload == big
    assert pipeline.jobs.list("acme")[0][0].payload == big and len(pipeline.jobs.list("acme")[0]) == 1
    assert len(_items(pipeline)) == 2  # the job and its payload
    pipeline.jobs.pause("acme", job.id, T1)  # unchanged payload: not rewritten
    smaller = {"blob": "z" * 4000}
    pipeline.jobs.update("acme", job.id, {"payload": smaller}, 2, T1)
    assert pipeline.jobs.get("acme", job.id).payload == smaller and len(_items(pipeline)) == 2
    pipeline.jobs.delete("acme", job.id, T1)
    assert _items(pipeline) == []


# --- create under a given id (Idempotency-Key claims) ------------------------------------------


def test_create_under_a_given_id_stores_the_job_under_that_id(pipeline):
    job = pipeline.jobs.create("acme", HOURLY, T1, job_id="jGivenId0000000000001")
    assert job.id == "jGivenId0000000000001"
    assert pipeline.jobs.get("acme", job.id).name == "report"


def test_a_second_create_under_the_same_id_is_refused_and_changes_nothing(pipeline):
    pipeline.jobs.create("acme", HOURLY, T1, job_id="jGivenId0000000000001")
    with pytest.raises(JobExistsError) as refused:
        pipeline.jobs.create("acme", HOURLY | {"payload": {"a": 2}}, T1, job_id="jGivenId0000000000001")
    assert refused.value.job_id == "jGivenId0000000000001"
    stored = pipeline.jobs.get("acme", "jGivenId0000000000001")
    assert stored.payload == {"a": 1} and stored.version == 1 and _job_count(pipeline) == 1


def test_a_refused_create_leaves_no_payload_item_beside_an_edited_job(pipeline):
    # Given a job with a large payload, created under an id, whose payload was edited since
    big = {"blob": "y" * 5000}
    pipeline.jobs.create("acme", HOURLY | {"payload": big}, T1, job_id="jGivenId0000000000001")
    pipeline.jobs.update("acme", "jGivenId0000000000001", {"payload": {"blob": "z" * 4000}}, 1, T1)
    # When the original create is written again under the same id
    with pytest.raises(JobExistsError):
        pipeline.jobs.create("acme", HOURLY | {"payload": big}, T1, job_id="jGivenId0000000000001")
    # Then the job and its current payload item are all there is; the edit stands
    assert len(_items(pipeline)) == 2
    assert pipeline.jobs.get("acme", "jGivenId0000000000001").payload == {"blob": "z" * 4000}


def test_finish_create_dispatches_a_due_job_whose_create_died_before_its_dispatch(pipeline, monkeypatch):
    # Given a create of a job due now that dies right after the job is written
    def die(*args, **kwargs):
        raise RuntimeError("the function stopped")

    real_dispatch = pipeline.dispatcher.dispatch_jobs
    monkeypatch.setattr(pipeline.dispatcher, "dispatch_jobs", die)
    with pytest.raises(RuntimeError):
        pipeline.jobs.create("acme", HOURLY | {"schedule": "* * * * *"}, T0, job_id="jGivenId0000000000001")
    assert pipeline.messages() == []
    monkeypatch.setattr(pipeline.dispatcher, "dispatch_jobs", real_dispatch)
    # When a retry finds the job, twice
    found = pipeline.jobs.finish_create("acme", "jGivenId0000000000001", T0 + timedelta(seconds=1))
    pipeline.jobs.finish_create("acme", "jGivenId0000000000001", T0 + timedelta(seconds=2))
    # Then the run due at T0 is sent once and the job is advanced past it
    run_ids = [m["body"]["run_id"] for m in pipeline.messages()]
    assert run_ids.count(make_run_id("jGivenId0000000000001", T0)) == 1
    assert found.next_due_at > T0


def test_finish_create_of_a_job_that_is_not_stored_is_not_found(pipeline):
    with pytest.raises(NotFoundError):
        pipeline.jobs.finish_create("acme", "jGivenId0000000000001", T0)
