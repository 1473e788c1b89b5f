"""Reading many runs by key for the fewest read units (the sweeper's reads, docs/decisions/0035).

DynamoDB bills a ``BatchGetItem`` per item: each run rounded up to 4 KB, 0.5 RRU eventually
consistent however small it is. It bills a ``Query`` by the total size of the items it returns,
rounded up once. A finished run item is about 500 bytes, so the runs of one job that lie next to each
other in its partition (a per-minute job's consecutive minutes, a backfill's instants, a workflow
run's nodes) cost about an eighth as much read with one Query over their key range.

:func:`read_runs` groups the keys by job. A job with two or more keys is read by Query,
``run_key BETWEEN <first> AND <last>``, limited to as many items as keys are still wanted there; when
the limit stopped the page first (other items lie between), the keys past it are queried the same way
from the first of them, until a page returns more items that were not asked for than items that were
-- from then on, the job's remaining keys are read by key. A job with one key, and those remaining
keys, are read by ``BatchGetItem``; the jobs' Queries go ``concurrency`` at a time. So a read costs at
most the by-key price plus one limited page of other items per job, and in the common case (the keys
contiguous) one rounding per job instead of one per run. What comes back is the same items, read the
same way (eventually consistent unless asked): a key whose run does not exist is simply absent.
"""

from __future__ import annotations

import contextvars
from collections import defaultdict
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from jobsched.ports.tables import Table

#: The jobs whose runs one read queries at once (one Query each): thousands of jobs are read in
#: seconds, not one request after another.
READ_CONCURRENCY = 8
#: The most items one Query page is asked for (about 500 KB of run items: under the 1 MB page).
MAX_PAGE_ITEMS = 1000

RunKey = tuple[str, str]  # (job_id, run_key)


def read_runs(
    dynamo: Table,
    table: str,
    keys: Iterable[Mapping[str, str]],
    *,
    consistent: bool = False,
    concurrency: int = READ_CONCURRENCY,
) -> dict[RunKey, dict[str, Any]]:
    """The items of ``keys`` (``{"job_id", "run_key"}``) that exist, by ``(job_id, run_key)``; the
    jobs' Queries ``concurrency`` at a time."""
    by_job: defaultdict[str, set[str]] = defaultdict(set)
    for key in keys:
        by_job[key["job_id"]].add(key["run_key"])
    ranged = {job_id: sorted(run_keys) for job_id, run_keys in by_job.items() if len(run_keys) > 1}
    by_key = [
        {"job_id": j, "run_key": k} for j, run_keys in by_job.items() if j not in ranged for k in run_keys
    ]

    def one(job_id: str) -> tuple[dict[RunKey, dict[str, Any]], list[str]]:
        return _query_range(dynamo, table, job_id, ranged[job_id], consistent)

    found: dict[RunKey, dict[str, Any]] = {}
    if concurrency > 1 and len(ranged) > 1:
        with ThreadPoolExecutor(max_workers=min(concurrency, len(ranged))) as pool:
            # each in a copy of the caller's context: its requests are for the caller's tenant (the
            # embedded mode's lanes) and metered as the caller's
            futures = [pool.submit(contextvars.copy_context().run, one, job_id) for job_id in ranged]
            results = [f.result() for f in futures]
    else:
        results = [one(job_id) for job_id in ranged]
    for (job_id, _), (items, left) in zip(ranged.items(), results, strict=True):
        found.update(items)
        by_key.extend({"job_id": job_id, "run_key": k} for k in left)
    for item in dynamo.batch_get(table, by_key, consistent=consistent) if by_key else []:
        found[(item["job_id"], item["run_key"])] = item
    return found


def _query_range(
    dynamo: Table, table: str, job_id: str, wanted: list[str], consistent: bool
) -> tuple[dict[RunKey, dict[str, Any]], list[str]]:
    """Read ``wanted`` (sorted run keys of ``job_id``, two or more) by Query pages: the items found,
    and the keys left to read by key."""
    found: dict[RunKey, dict[str, Any]] = {}
    rest = wanted
    while len(rest) >= 2:
        want = set(rest)
        items, last = dynamo.query(
            table,
            "job_id = :j AND run_key BETWEEN :lo AND :hi",
            {":j": job_id, ":lo": rest[0], ":hi": rest[-1]},
            limit=min(len(rest), MAX_PAGE_ITEMS),
            consistent=consistent,
        )
        hits = 0
        for item in items:
            if item["run_key"] in want:
                found[(job_id, item["run_key"])] = item
                hits += 1
        if last is None:
            return found, []  # the whole range was read: a key it did not return has no item
        rest = [k for k in rest if k > last["run_key"]]
        if hits * 2 < len(items):
            break  # mostly other items between the keys: the rest by key
    return found, rest
