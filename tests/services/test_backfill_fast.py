"""Backfills on the in-memory fakes: the conditional puts are overlapped (decision 0020), each run id is still
created at most once, and the requests are the ones docs/api.md counts to model the answer time of
the documented maximum (1000 occurrences) on AWS."""

from __future__ import annotations

import threading
from collections import Counter
from datetime import timedelta

from tests.aws.conftest import T0
from tests.aws.memory import memory_aws_units, memory_pipeline  # noqa: F401  (on the in-memory fakes)

DAILY = {"name": "daily", "schedule": "0 3 * * *", "target": {"handler": "echo"}, "payload": {"a": 1}}
#: The request counts are checked on 200 runs (chosen when this ran on moto, whose SQS slowed down more
#: than linearly with the messages of one send: 1000 took 89 s under load); they are linear in the
#: runs (docs/api.md models the documented maximum from them).
RUNS = 200


def _window(days: int) -> tuple:
    end = T0 - timedelta(days=1) + timedelta(hours=3 - T0.hour)  # an occurrence at 03:00 the day before
    return end - timedelta(days=days - 1), end


def test_a_backfill_creates_each_run_once_with_one_put_per_run_and_one_send_per_ten(pipeline):
    """Given a daily job / When 200 days are backfilled / Then 200 runs exist, each with one message,
    made by exactly 200 conditional PutItem and 20 SendMessageBatch requests."""
    job = pipeline.jobs.create("acme", DAILY, T0)
    start, end = _window(RUNS)
    pipeline.meter.reset()

    runs = pipeline.jobs.backfill("acme", job.id, start, end, T0)

    assert len(runs) == RUNS and len({r.id for r in runs}) == RUNS
    assert [r.scheduled_at for r in runs] == sorted(r.scheduled_at for r in runs)  # order kept
    messages = Counter(m["body"]["run_id"] for m in pipeline.messages("default"))
    assert set(messages) == {r.id for r in runs} and set(messages.values()) == {1}
    assert pipeline.meter.requests["dynamodb.PutItem"] == RUNS
    assert pipeline.meter.requests["sqs.SendMessageBatch"] == RUNS // 10


def test_the_puts_of_a_backfill_are_in_flight_together(pipeline, monkeypatch):
    """Given a put that waits until a second put is in flight / When a job is backfilled / Then the
    backfill completes: its puts overlap (one after the other, the first put would wait forever)."""
    job = pipeline.jobs.create("acme", DAILY, T0)
    start, end = _window(20)
    client = pipeline.dispatcher.runs.dynamo.client
    real_put = client.put_item
    together = threading.Barrier(2, timeout=5)
    waited = []

    def put_item(**kwargs):
        if len(waited) < 2:
            waited.append(threading.get_ident())
            together.wait()  # BrokenBarrierError after 5 s if no second put comes while this one waits
        return real_put(**kwargs)

    monkeypatch.setattr(client, "put_item", put_item)
    runs = pipeline.jobs.backfill("acme", job.id, start, end, T0)

    assert len(runs) == 20
    assert len(set(waited)) == 2  # two different threads were in a put at the same moment


def test_two_overlapping_backfills_racing_create_each_run_id_once(pipeline):
    """Given two backfills of overlapping ranges started at the same moment / When both finish /
    Then every occurrence has one run item, created by exactly one of the two calls."""
    job = pipeline.jobs.create("acme", DAILY, T0)
    start, end = _window(60)
    created: list[tuple[str, bool]] = []
    lock = threading.Lock()
    store = pipeline.dispatcher.runs
    real = store.put_announced

    def recording(run):
        stored, was_created = real(run)
        with lock:
            created.append((stored.id, was_created))
        return stored, was_created

    store.put_announced = recording
    go = threading.Barrier(2)
    results: dict[str, list] = {}

    def backfill(name: str, first, last) -> None:
        go.wait()
        results[name] = pipeline.jobs.backfill("acme", job.id, first, last, T0)

    threads = [
        threading.Thread(target=backfill, args=("a", start, end)),
        threading.Thread(target=backfill, args=("b", start + timedelta(days=20), end)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)

    assert len(results["a"]) == 60 and len(results["b"]) == 40
    creations = Counter(run_id for run_id, was_created in created if was_created)
    assert len(creations) == 60 and set(creations.values()) == {1}
    items, _ = pipeline.dispatcher.runs.list_for_job(job.id, limit=1000)
    assert len(items) == 60
