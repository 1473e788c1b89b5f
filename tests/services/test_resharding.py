"""Changing the shard count (up and down, while ticks run) on the in-memory fakes: no job stranded,
one run per occurrence; two shards reading one partition; the upgrade from shard-keyed due index
entries; what an idle tick reads (docs/decisions/0016-due-partitions.md). A second deployment is
provisioned beside the first as on moto (``InMemoryTables.create_table``)."""

from __future__ import annotations

import zlib
from collections import Counter
from datetime import timedelta

import pytest

from jobsched.aws.jobs_store import JobsStore
from jobsched.core.ids import DUE_PARTITIONS, partition_for, partition_key, partitions_of, shard_for
from jobsched.core.models import make_run_id
from jobsched.services.dispatcher import LEGACY_REKEY_WINDOW, Dispatcher, DispatcherConfig
from tests.aws.conftest import T0, Pipeline, provision
from tests.aws.memory import build_pipeline, memory_aws, memory_pipeline  # noqa: F401  (on the in-memory fakes)

EVERY_MINUTE = {"name": "m", "schedule": "* * * * *", "target": {"handler": "echo"}}
JOBS = 24
M = timedelta(minutes=1)


def _pipeline(aws, shards: int, prefix: str) -> Pipeline:
    aws.settings = provision(aws.clients, prefix=prefix, shards=shards)
    return build_pipeline(aws)


def _jobs(p: Pipeline) -> list:
    """Per-minute jobs of three tenants, and one-off jobs due at 12:05:30, 12:06:10 and 12:07:00
    (around the change), all created at 11:59:30."""
    created = [p.jobs.create(f"tenant{i % 3}", EVERY_MINUTE, T0 - timedelta(seconds=30)) for i in range(JOBS)]
    for at in ("2026-03-02T12:05:30", "2026-03-02T12:06:10", "2026-03-02T12:07:00"):
        spec = {"name": f"once {at}", "schedule": f"at({at})", "target": {"handler": "echo"}}
        created.append(p.jobs.create("tenant0", spec, T0 - timedelta(seconds=30)))
    return created


def _tick_all(p: Pipeline, shards: int, now) -> list:
    return [p.dispatcher.dispatch_shard(k, now, shards) for k in range(shards)]


def _assert_each_occurrence_once(p: Pipeline, jobs: list, until) -> None:
    """Every occurrence up to ``until`` has its run, and was sent exactly once; every job goes on."""
    sent = Counter(m["body"]["run_id"] for m in p.messages())
    expected = []
    for job in jobs:
        if job.schedule.startswith("at("):
            stored = p.dispatcher.jobs.get(job.tenant, job.id)
            expected.append(make_run_id(job.id, job.next_due_at))
            assert stored.next_due_at is None  # fired: completed
            continue
        minute = T0
        while minute <= until:
            expected.append(make_run_id(job.id, minute))
            minute += M
        stored = p.dispatcher.jobs.get(job.tenant, job.id)
        assert stored.next_due_at > until, f"job {job.id} stranded at {stored.next_due_at}"
    missing = [rid for rid in expected if p.dispatcher.runs.find(rid) is None]
    assert missing == []
    assert {rid: n for rid, n in sent.items() if n != 1} == {}
    assert set(expected) <= set(sent)


@pytest.mark.parametrize(("before", "after"), [(2, 4), (4, 2), (3, 5), (8, 1)])
def test_changing_the_shard_count_while_ticks_run_strands_no_job_and_sends_each_run_once(aws, before, after):
    # Given per-minute and one-off jobs dispatched for five minutes by `before` shards
    p = _pipeline(aws, before, f"reshard{before}{after}")
    jobs = _jobs(p)
    for minute in range(5):
        _tick_all(p, before, T0 + minute * M)
    # When, during the change, both the old and the new schedules tick in the same minute (old ones
    # first, then new ones, then old ones again: a deployment replacing them one by one)
    change = T0 + 5 * M
    old_first = [p.dispatcher.dispatch_shard(k, change, before) for k in range(0, before, 2)]
    new = _tick_all(p, after, change + timedelta(seconds=20))
    old_late = [
        p.dispatcher.dispatch_shard(k, change + timedelta(seconds=40), before) for k in range(1, before, 2)
    ]
    # and then only the new ones, for ten minutes
    for minute in range(6, 16):
        new += _tick_all(p, after, T0 + minute * M)
    # Then no tick was refused, every partition was read by the new shards, and every occurrence
    # (one-offs due during the change included) has one run, sent once; every job is still dispatched
    assert all(not s.lease_busy for s in old_first + new + old_late)
    assert sorted(p for s in new[:after] for p in s.partitions) == list(range(DUE_PARTITIONS))
    _assert_each_occurrence_once(p, jobs, T0 + 15 * M)


def test_a_job_whose_partition_moves_to_a_shard_with_a_lower_lease_token_is_still_advanced(aws):
    # Given a job whose shard ticked 30 times under 4 shards (its fence is that lease's token 30)
    p = _pipeline(aws, 4, "fence")
    job = next(
        j
        for j in (p.jobs.create("acme", EVERY_MINUTE, T0 - timedelta(seconds=30)) for _ in range(40))
        if shard_for(j.id, 4) != shard_for(j.id, 2) and shard_for(j.id, 4) != 0
    )
    old, new = shard_for(job.id, 4), shard_for(job.id, 2)
    for minute in range(30):
        p.dispatcher.dispatch_shard(old, T0 + minute * M, 4)
    fenced = p.dispatcher.jobs.get("acme", job.id)
    assert fenced.fence == 30 and fenced.fence_lease == f"shard#{old}"
    # When the count is lowered to 2 and its new shard (lease token 1) ticks
    summary = p.dispatcher.dispatch_shard(new, T0 + 30 * M, 2)
    # Then the job is advanced under the new lease (tokens of different leases are not compared)
    assert summary.fences[new] == 1 and summary.jobs_advanced >= 1
    advanced = p.dispatcher.jobs.get("acme", job.id)
    assert advanced.fence == 1 and advanced.fence_lease == f"shard#{new}"
    assert advanced.next_due_at > fenced.next_due_at


class _ReadThenWait(JobsStore):
    """A JobsStore whose first ``get_many`` lets another tick run between the read and the return."""

    def __init__(self, inner: JobsStore, meanwhile):
        super().__init__(inner.dynamo, inner.table)
        self.meanwhile = meanwhile
        self.fired = False

    def get_many(self, keys):
        read = super().get_many(keys)
        if read and not self.fired:
            self.fired = True
            self.meanwhile()
        return read


def test_two_shards_reading_one_partition_mid_tick_create_one_run_per_occurrence(aws):
    # Given jobs in partitions owned by shard 3 of 4 (old mapping) and by shard 1 of 2 (new mapping)
    p = _pipeline(aws, 4, "overlap")
    # (fixed ids: with random ones, none of the 24 lands in such a partition once in ~1,000 runs)
    p.jobs.id_factory = iter(f"joverlap{i:02d}" for i in range(JOBS + 3)).__next__
    jobs = [j for j in _jobs(p)[:JOBS] if partition_for(j.id) % 4 == 3]
    assert len(jobs) == 5
    d = p.dispatcher
    new_summary = []
    old = Dispatcher(
        _ReadThenWait(d.jobs, lambda: new_summary.append(d.dispatch_shard(1, T0 + 4 * M, 2))),
        d.runs,
        d.leases,
        d.queues,
        config=DispatcherConfig(
            lookahead=d.lookahead, enqueue_horizon=d.horizon, owner="old-mapping", shards=4, reads_clock=False
        ),
        clock=d.clock,
    )
    # When the old-mapping tick reads the due jobs, then the new-mapping tick runs whole, then the
    # old one goes on with what it read
    old_summary = old.dispatch_shard(3, T0 + 4 * M, 4)
    # Then the new tick created the runs; the old one created none (its puts found them) and its
    # advances were refused (the jobs had moved on): one run item per occurrence
    assert new_summary[0].runs_created > 0 and new_summary[0].jobs_advanced >= len(jobs)
    assert old_summary.runs_created == 0 and old_summary.jobs_advanced == 0
    assert old_summary.jobs_stale == len(jobs)
    for job in jobs:
        runs, _ = d.runs.list_for_job(job.id, limit=100, newest_first=False)
        ids = [r.id for r in runs]
        assert len(ids) == len(set(ids))
        assert ids == [make_run_id(job.id, T0 + i * M) for i in range(len(ids))]
    # (the old tick's re-sends are duplicate deliveries of queued runs: the worker's conditional
    # claim lets one execute, tests/aws/test_worker.py)


def _make_legacy(p: Pipeline, jobs: list, legacy_shards: int, fence: int, leases: bool = True) -> None:
    """Rewrite the stored jobs (and shard leases) as the version before partitions left them."""
    table = p.env.settings.jobs_table
    for job in jobs:
        key = {"tenant": {"S": job.tenant}, "job_id": {"S": job.id}}
        item = p.env.clients.dynamodb.get_item(TableName=table, Key=key)["Item"]
        if "due_shard" not in item:
            continue
        shard = zlib.crc32(job.id.encode()) % legacy_shards
        p.env.clients.dynamodb.update_item(
            TableName=table,
            Key=key,
            UpdateExpression="SET due_shard = :s, #shard = :n, fence = :f REMOVE fence_lease",
            ExpressionAttributeNames={"#shard": "shard"},
            ExpressionAttributeValues={
                ":s": {"S": str(shard)},
                ":n": {"N": str(shard)},
                ":f": {"N": str(fence)},
            },
        )
    for k in range(legacy_shards if leases else 0):
        p.env.clients.dynamodb.put_item(
            TableName=p.env.settings.leases_table,
            Item={
                "lease_key": {"S": f"shard#{k}"},
                "owner": {"S": "old-version"},
                "token": {"N": str(fence)},
                "lease_until": {"S": "2026-03-02T11:00:00+00:00"},  # expired: the old version is gone
            },
        )


def _due_keys(p: Pipeline) -> list[str]:
    items = p.env.clients.dynamodb.scan(TableName=p.env.settings.jobs_table)["Items"]
    return [i["due_shard"]["S"] for i in items if "due_shard" in i]


@pytest.mark.parametrize("shards_after", [4, 2, 6])
def test_upgrading_from_shard_keyed_entries_rekeys_them_and_dispatches_every_job(aws, shards_after):
    # Given jobs the version before partitions indexed under 4 shard numbers (fences from its leases)
    p = _pipeline(aws, 4, f"legacy{shards_after}")
    jobs = _jobs(p)
    for minute in range(4):
        _tick_all(p, 4, T0 + minute * M)
    _make_legacy(p, jobs, legacy_shards=4, fence=9)
    assert all(k.isdigit() for k in _due_keys(p))
    # When this version ticks, with the count unchanged or changed in the same deployment
    first = _tick_all(p, shards_after, T0 + 4 * M)
    # Then every legacy entry is re-keyed to its partition, and no job misses an occurrence
    assert sum(s.jobs_rekeyed for s in first) > 0
    assert all(k.startswith("p") for k in _due_keys(p))
    for minute in range(5, 12):
        _tick_all(p, shards_after, T0 + minute * M)
    _assert_each_occurrence_once(p, jobs, T0 + 11 * M)


def test_an_entry_the_old_version_writes_during_the_deployment_is_rekeyed_within_the_window(aws):
    # Given an upgraded deployment whose shards have ticked once (their window open)
    p = _pipeline(aws, 4, "latewriter")
    jobs = _jobs(p)[:4]
    _make_legacy(p, [], legacy_shards=4, fence=3)
    _tick_all(p, 4, T0)
    # When a function of the old version, still running, writes a job under a shard number
    _make_legacy(p, jobs[:1], legacy_shards=4, fence=3, leases=False)
    # Then a tick within the hour moves it; after the hour, ticks read only their partitions
    later = [s.jobs_rekeyed for s in _tick_all(p, 4, T0 + 30 * M)]
    assert sum(later) == 1 and all(k.startswith("p") for k in _due_keys(p))
    p.meter.reset()
    _tick_all(p, 4, T0 + LEGACY_REKEY_WINDOW + M)
    assert p.meter.snapshot()["requests"]["dynamodb.Query"] == DUE_PARTITIONS


@pytest.mark.parametrize("shards", [1, 4, 32])
def test_an_idle_tick_of_a_fresh_deployment_reads_its_partitions_and_nothing_else(aws, shards):
    # Given a fresh deployment whose shards ticked once (creating their lease items)
    p = _pipeline(aws, shards, f"idle{shards}")
    _tick_all(p, shards, T0)
    p.meter.reset()
    # When a shard ticks with nothing due
    summary = p.dispatcher.dispatch_shard(0, T0 + M, shards)
    # Then it costs its lease (acquire, release) and one Query per partition it owns: no legacy
    # re-keying, no lease re-check (nothing to advance)
    requests = p.meter.snapshot()["requests"]
    assert summary.partitions == partitions_of(0, shards)
    assert requests == {"dynamodb.UpdateItem": 2, "dynamodb.Query": len(partitions_of(0, shards))}


def test_partition_keys_are_what_the_due_index_stores(pipeline):
    job = pipeline.jobs.create("acme", EVERY_MINUTE, T0)
    item = pipeline.env.clients.dynamodb.get_item(
        TableName=pipeline.env.settings.jobs_table, Key={"tenant": {"S": "acme"}, "job_id": {"S": job.id}}
    )["Item"]
    assert item["due_shard"]["S"] == partition_key(partition_for(job.id))
    assert "shard" not in item
