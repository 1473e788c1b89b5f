"""Worker and handler versions (issue 29, decision 0048): which version a run executes, what its
attempts record, and how envelopes, retries and dead letters written before a deploy run after it.

"A deploy" is simulated the way it happens in one process: the versions registered change between
two deliveries (``registry.job`` / ``registry.unregister``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from jobsched.core.errors import RetryableError
from jobsched.core.models import RunState
from jobsched.services.deliveries import Delivery
from jobsched.targets import registry
from tests.aws.conftest_worker import Kit, run_service, sent_messages
from tests.aws.memory import memory_aws  # noqa: F401  (this file runs on the in-memory fakes)

NAME = "test.versions.report"
CODE = "a1b2c3d"


@pytest.fixture
def kit(aws, clock):
    return Kit(aws, clock)


@pytest.fixture
def calls() -> Iterator[list[tuple[int, dict[str, Any]]]]:
    """(version, payload) of every call of the test's handler; unregisters it afterwards."""
    seen: list[tuple[int, dict[str, Any]]] = []
    yield seen
    registry.unregister(NAME)


def register(version: int, seen: list, *, fail_first: bool = False, upgrades: dict | None = None) -> None:
    """Register ``version`` of the test's handler: it records its call, returns its version, and with
    ``fail_first`` fails its first call with a retryable error."""

    def handler(payload: dict, ctx: Any) -> dict:
        seen.append((version, payload))
        if fail_first and len(seen) == 1:
            raise RetryableError("first call fails")
        return {"version": version}

    handler.__qualname__ = f"handler_v{version}_{'f' if fail_first else 'p'}"  # one identity per kind
    registry.job(NAME, version=version, upgrades=upgrades)(handler)


def deliver(kit: Kit, body: str, owner: str = "worker-a"):
    return kit.worker(owner, code_version=CODE).handle(Delivery.of(body), kit.clock.now())


def test_a_v1_and_a_v2_envelope_sent_to_one_worker_both_execute(kit, clock, calls):
    # Given version 2 of a handler that upgrades version 1's payloads, and two queued runs: one whose
    # message old code wrote (v=1: no payload_version), one written now (v=2, payload for version 2)
    register(2, calls, upgrades={1: lambda p: {"rows": p["n"]}})
    old_run, old_msg = kit.new_run({"handler": NAME}, {"n": 5}, job_id="old")
    new_run, new_msg = kit.new_run({"handler": NAME}, {"rows": 7}, job_id="new")
    v1_body = {k: v for k, v in old_msg.to_dict().items() if k != "payload_version"} | {"v": 1}
    new_msg.payload_version = 2
    # When one worker handles both
    outcomes = [deliver(kit, json.dumps(v1_body)), deliver(kit, new_msg.to_json())]
    # Then both ran version 2, the v1 payload upgraded from version 1, and each run is bound to it
    assert [o.status for o in outcomes] == ["succeeded", "succeeded"]
    assert calls == [(2, {"rows": 5}), (2, {"rows": 7})]
    for run in (old_run, new_run):
        stored = kit.runs.get(run.id)
        assert (stored.handler, stored.handler_version) == (NAME, 2)


def test_the_claim_records_what_ran_the_attempt(kit, clock, calls):
    # Given a queued run of an unpinned handler at version 1
    register(1, calls)
    run, msg = kit.new_run({"handler": NAME}, {})
    # When a worker of code version a1b2c3d runs it
    deliver(kit, msg.to_json())
    # Then the run is bound to version 1 and its attempt names the handler, version and code version
    stored = kit.runs.get(run.id)
    assert stored.handler_version == 1
    attempt = stored.attempts[0]
    assert (attempt.handler, attempt.handler_version, attempt.code_version) == (NAME, 1, CODE)


def test_a_retry_keeps_its_bound_version_after_the_newest_changes(kit, clock, calls):
    # Given a run whose first attempt ran version 1 and failed, retryable
    register(1, calls, fail_first=True)
    run, msg = kit.new_run({"handler": NAME}, {"x": 1}, base_seconds=1, max_seconds=1)
    assert deliver(kit, msg.to_json()).status == "retrying"
    [(retry, _)] = sent_messages(kit.aws)
    # When a deploy registers version 2 beside it, and the retry is delivered
    register(2, calls)
    clock.advance(seconds=2)
    out = deliver(kit, json.dumps(retry), owner="worker-b")
    # Then the retry carried version 1 and ran it; both attempts say version 1
    assert retry["v"] == 2 and retry["target"] == {"handler": NAME, "version": 1}
    assert out.status == "succeeded" and [v for v, _ in calls] == [1, 1]
    stored = kit.runs.get(run.id)
    assert [a.handler_version for a in stored.attempts] == [1, 1] and stored.output == {"version": 1}


def test_an_upgraded_payload_reaches_the_handler(kit, clock, calls):
    # Given version 2 with an upgrader from version 1, and a run whose job's payload was written for 1
    register(2, calls, upgrades={1: lambda p: {"tag": p["tag"], "rows": p["count"]}})
    run, msg = kit.new_run({"handler": NAME}, {"count": 3, "tag": "a"})
    msg.payload_version = 1
    # When it runs
    deliver(kit, msg.to_json())
    # Then the handler got the payload as version 2 expects it
    assert calls == [(2, {"tag": "a", "rows": 3})]
    assert kit.runs.get(run.id).state is RunState.SUCCEEDED


def test_a_missing_version_dead_letters_with_a_message_naming_it(kit, clock, calls):
    # Given a job pinned to version 3 and a deployment that registers only version 1
    register(1, calls)
    run, msg = kit.new_run({"handler": NAME, "version": 3}, {})
    # When its run is delivered
    out = deliver(kit, msg.to_json())
    # Then it is dead-lettered at once (permanent), naming the version; nothing ran
    assert out.status == "dead_lettered" and out.detail["reason"] == "permanent"
    assert "has no version 3" in out.detail["error"] and calls == []
    stored = kit.runs.get(run.id)
    assert stored.state is RunState.FAILED and stored.handler_version == 3


def test_a_payload_with_no_upgrade_path_dead_letters_naming_both_versions(kit, clock, calls):
    # Given version 2 without upgraders and a message whose payload was written for version 1
    register(2, calls)
    _, msg = kit.new_run({"handler": NAME}, {"n": 1})
    msg.payload_version = 1
    # When it runs
    out = deliver(kit, msg.to_json())
    # Then it is a permanent failure that says which versions it could not bridge
    assert out.status == "dead_lettered" and calls == []
    assert "version 2 cannot take a payload written for version 1" in out.detail["error"]


def test_a_run_bound_to_another_version_runs_that_one(kit, clock, calls):
    # Given versions 1 and 2, and a retrying run bound to version 1 whose message names no version
    # (re-sent by a sweeper from the job before it learnt the binding)
    register(1, calls)
    register(2, calls)
    run, msg = kit.new_run({"handler": NAME}, {})
    kit.dynamo.update(
        kit.aws.settings.runs_table,
        {"job_id": run.job_id, "run_key": run.run_key},
        "SET handler_version = :v",
        values={":v": 1},
    )
    # When the message is delivered (the worker would pick the newest, 2)
    out = deliver(kit, msg.to_json())
    # Then the run executed the version it was bound to, and the attempt entry says so
    assert out.status == "succeeded" and [v for v, _ in calls] == [1]
    assert kit.runs.get(run.id).attempts[0].handler_version == 1


def test_a_dead_letter_replays_the_version_it_was_bound_to(kit, clock, calls):
    # Given a run of version 1 dead-lettered (its only attempt failed), then a deploy adding version 2
    register(1, calls, fail_first=True)
    run, msg = kit.new_run({"handler": NAME}, {}, max_attempts=1)
    assert deliver(kit, msg.to_json()).status == "dead_lettered"
    register(2, calls)
    # When it is replayed and the replay's message delivered
    run_service(kit).replay("acme", run.id, clock.now())
    [(replay, _)] = sent_messages(kit.aws)
    out = deliver(kit, json.dumps(replay), owner="worker-b")
    # Then the snapshot carried version 1 and version 1 ran again
    assert replay["target"] == {"handler": NAME, "version": 1}
    assert out.status == "succeeded" and [v for v, _ in calls] == [1, 1]
