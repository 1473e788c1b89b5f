"""A tick writes the jobs of a page several at a time (``dispatch_concurrency``, docs/scaling.md),
with the same outcome as one at a time: every run once, every job advanced, the same summary. On the
fakes reached as a DynamoDB client, whose writes the test counts while they are in flight."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from typing import Any

from tests.aws.conftest import T0
from tests.aws.memory import build_pipeline, memory_aws_units  # noqa: F401  (on the in-memory fakes)

EVERY_MINUTE = {"name": "tick", "schedule": "* * * * *", "target": {"handler": "echo"}}


class InFlight:
    """Counts the DynamoDB writes in flight at once (each held 10 ms, as a network call would be)."""

    def __init__(self) -> None:
        self.now = self.peak = 0
        self.lock = threading.Lock()

    def before(self, **_: object) -> None:
        with self.lock:
            self.now += 1
            self.peak = max(self.peak, self.now)
        time.sleep(0.01)

    def after(self, **_: object) -> None:
        with self.lock:
            self.now -= 1

    def around(self, call: Callable[..., Any]) -> Callable[..., Any]:
        """``call`` counted while in flight (what botocore's before-call/after-call events bracket)."""

        def counted(**kwargs: Any) -> Any:
            self.before()
            try:
                return call(**kwargs)
            finally:
                self.after()

        return counted


def tick_of_jobs(aws, concurrency: int):
    """12 per-minute jobs, all in shard 0 (one shard), then one tick three minutes on with the
    writes of ``concurrency`` jobs at once: (summary, runs per job, peak writes in flight)."""
    settings = replace(aws.settings, shards=1, dispatch_concurrency=concurrency)
    pipeline = build_pipeline(replace(aws, settings=settings), owner=f"d{concurrency}")
    jobs = [
        pipeline.jobs.create("acme", {**EVERY_MINUTE, "name": f"{concurrency}-{i}"}, T0) for i in range(12)
    ]
    counter = InFlight()
    client = aws.clients.dynamodb  # the fakes' DynamoDB client: every write of the tick passes it
    for call in ("put_item", "update_item"):
        setattr(client, call, counter.around(getattr(client, call)))
    try:
        summary = pipeline.dispatcher.dispatch_shard(0, T0 + timedelta(minutes=3))
    finally:
        for call in ("put_item", "update_item"):
            delattr(client, call)
    runs = {
        job.id: {
            r.id for r in pipeline.dispatcher.runs.list_for_job(job.id, limit=100, newest_first=False)[0]
        }
        for job in jobs
    }
    return summary, runs, counter.peak


COMPARED = ("jobs_seen", "jobs_advanced", "jobs_stale", "runs_created", "runs_reused", "messages_sent")


def test_a_tick_writes_several_jobs_at_once_with_the_same_outcome(aws):
    """Given 12 due per-minute jobs in one shard, When a tick dispatches them 8 at a time and another
    12 one at a time, Then the concurrent tick's writes overlap (more than one in flight), the other's
    never do, and both end alike: every job advanced, each job with the same runs (one per
    occurrence), the same counts in the summary."""
    concurrent, runs_c, peak_c = tick_of_jobs(aws, 8)
    sequential, runs_s, peak_s = tick_of_jobs(aws, 1)
    assert peak_c > 1 and peak_s == 1
    assert {k: getattr(concurrent, k) for k in COMPARED} == {k: getattr(sequential, k) for k in COMPARED}
    assert concurrent.jobs_advanced == 12 and concurrent.send_failures == 0
    assert concurrent.messages_sent == concurrent.runs_created > 0
    assert instants(runs_c) == instants(runs_s) and len(instants(runs_c)) == 12


def instants(runs: dict[str, set[str]]) -> list[list[str]]:
    """Per job (in creation order), its runs' instants: the run id without the job id."""
    return [sorted(run_id.split(".", 1)[1] for run_id in ids) for ids in runs.values()]
