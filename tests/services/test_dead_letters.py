"""Dead letters: list (with filters), replay (same or corrected payload), discard, replay by filter;
every replay and discard is recorded on the run."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from jobsched.core.errors import ConflictError, NotFoundError
from jobsched.core.models import RunState
from jobsched.services.dead_letters import DeadLetterFilter, DeadLetterService
from jobsched.services.deliveries import Delivery
from tests.aws.conftest_worker import Kit, fail_permanently, run_service, sent_messages
from tests.aws.memory import memory_aws  # noqa: F401  (this file runs on the in-memory fakes)


@pytest.fixture
def kit(aws, clock):
    return Kit(aws, clock)


@pytest.fixture
def dead(kit):
    return DeadLetterService(run_service(kit))


def test_a_dead_letter_keeps_payload_error_and_attempt_history(kit, dead, clock):
    # Given a run that failed permanently
    run, _ = fail_permanently(kit, {"kind": "permanent", "order": 7})
    # When the dead letters are listed
    items, cursor = dead.list("acme")
    # Then it is there with what is needed to understand and replay it, its target carrying the
    # handler version the run was bound to (a replay runs that version: decision 0048)
    assert cursor is None and len(items) == 1
    view = items[0]
    assert view["run_id"] == run.id and view["reason"] == "permanent"
    assert view["payload"] == {"kind": "permanent", "order": 7}
    assert view["target"] == {"handler": "demo.fail", "version": 1}
    assert "PermanentError" in view["error"] and view["attempts"][0]["outcome"] == "failed"
    assert view["failed_at"] == "2026-03-02T12:00:00.000Z"


def test_dead_letters_of_another_tenant_are_invisible(kit, dead):
    run, _ = fail_permanently(kit)
    assert dead.list("other")[0] == []
    with pytest.raises(NotFoundError):
        dead.replay("other", run.id, kit.clock.now())


def test_list_filters_by_job_reason_and_time(kit, dead, clock):
    # Given dead letters of two jobs, ten minutes apart
    first, _ = fail_permanently(kit, job_id="alpha")
    clock.advance(minutes=10)
    second, _ = fail_permanently(kit, job_id="beta")
    # Then each filter selects the expected one
    by_job, _ = dead.list("acme", flt=DeadLetterFilter(job_id="alpha"))
    recent, _ = dead.list("acme", flt=DeadLetterFilter(since=clock.now() - timedelta(minutes=1)))
    by_reason, _ = dead.list("acme", flt=DeadLetterFilter(reason="exhausted"))
    assert [v["run_id"] for v in by_job] == [first.id]
    assert [v["run_id"] for v in recent] == [second.id]
    assert by_reason == []


def test_list_pages_newest_first_with_a_cursor(kit, dead, clock):
    ids = []
    for minute in range(3):
        run, _ = fail_permanently(kit, job_id=f"job{minute}")
        ids.append(run.id)
        clock.advance(minutes=1)
    page1, cursor = dead.list("acme", limit=2)
    page2, end = dead.list("acme", limit=2, cursor=cursor)
    assert cursor is not None and end is None
    assert [v["run_id"] for v in page1 + page2] == ids[::-1]


def test_replay_with_a_corrected_payload_runs_it_and_records_the_replay(kit, dead, clock, aws):
    # Given a dead letter that failed on its payload
    run, _ = fail_permanently(kit, {"kind": "permanent"})
    clock.advance(minutes=3)
    # When it is replayed with a corrected payload
    queued = dead.replay("acme", run.id, clock.now(), payload={"kind": "retryable-not"})
    # Then the run is queued again with the override, out of the dead letters, the replay recorded
    assert queued.state is RunState.QUEUED and queued.payload_override == {"kind": "retryable-not"}
    assert queued.replays[0]["payload_changed"] is True and queued.replays[0]["action"] == "replay"
    assert dead.list("acme")[0] == []
    # And the next attempt's message carries the corrected payload
    [(body, _)] = sent_messages(aws)
    assert body["attempt"] == 2 and body["payload"] == {"kind": "retryable-not"}


def test_replayed_run_executes_with_the_corrected_payload(kit, dead, clock, aws):
    # Given a dead letter replayed with a new payload (one that still fails, with a new message)
    run, _ = fail_permanently(kit)
    dead.replay("acme", run.id, clock.now(), payload={"kind": "permanent", "message": "still bad"})
    [(body, _)] = sent_messages(aws)
    # When the replay's attempt runs
    out = kit.worker().handle(Delivery.of(json.dumps(body)), clock.now())
    # Then it ran with the new payload, and the dead letter shows both attempts and the replay
    assert out.status == "dead_lettered"
    view = dead.get("acme", run.id)
    assert "still bad" in view["error"] and [a["attempt"] for a in view["attempts"]] == [1, 2]
    assert len(view["replays"]) == 1


def test_replaying_twice_is_a_conflict(kit, dead, clock):
    run, _ = fail_permanently(kit)
    dead.replay("acme", run.id, clock.now())
    with pytest.raises((ConflictError, NotFoundError)):
        dead.replay("acme", run.id, clock.now())


def test_discard_removes_the_dead_letter_and_records_it(kit, dead, clock):
    run, _ = fail_permanently(kit)
    discarded = dead.discard("acme", run.id, clock.now())
    assert discarded.state is RunState.FAILED and discarded.replays[0]["action"] == "discard"
    assert dead.list("acme")[0] == []
    with pytest.raises(NotFoundError):
        dead.replay("acme", run.id, clock.now())


def test_replay_by_filter_replays_only_the_matching_dead_letters(kit, dead, clock, aws):
    # Given three dead letters, two of job "alpha"
    a1, _ = fail_permanently(kit, job_id="alpha")
    clock.advance(minutes=1)
    a2, _ = fail_permanently(kit, job_id="alpha")
    clock.advance(minutes=1)
    other, _ = fail_permanently(kit, job_id="beta")
    # When the dead letters of "alpha" are replayed
    result = dead.replay_matching("acme", clock.now(), DeadLetterFilter(job_id="alpha"))
    # Then those two are queued again (and each replay recorded); beta stays dead
    assert result["replayed"] == 2 and set(result["run_ids"]) == {a1.id, a2.id} and result["errors"] == []
    assert [v["run_id"] for v in dead.list("acme")[0]] == [other.id]
    assert all(kit.runs.get(r).replays for r in (a1.id, a2.id))
    assert sorted(b["run_id"] for b, _ in sent_messages(aws)) == sorted([a1.id, a2.id])
