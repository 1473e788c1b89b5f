"""The run-event log of ``jobsched dev``: one line per run state change, read from the Runs table.

The watcher needs no hook in the worker or the dispatcher: every ``interval`` seconds it lists each
tenant's recent runs through the tenant's run feed (feed items are keyed by the hour of their runs'
scheduled instants, so a key range bounds the read: no table scan, see
docs/decisions/0004-tenant-run-feed.md), reads the state of the runs not yet seen finished, and
prints what changed (each feed item is read whole once, then only listed by key; finished runs
that left the window are forgotten, so the watcher's reads and memory stay in proportion to the
window, not to the session's history): ``HH:MM:SS  <event>  <job name>  <run id>``, the event
and the job name padded so the run ids line up (the name column is as wide as the longest job name
printed so far, at least :data:`NAME_WIDTH`). Runs the dispatcher queued ahead of their instant
are reported as queued when that instant comes, so the log reads in time order (and are not read
before it: a burst queued ahead costs the emulated DynamoDB nothing until it falls due).
A state that lasted less than one interval may go unseen (a fast run can show queued then
succeeded); the final state is always seen.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from jobsched.core.feed import bucket_of, entry_key, feed_partition
from jobsched.core.models import run_key_for, scheduled_at_from_run_key

log = logging.getLogger(__name__)

# Run state -> the word printed for it (a run back in `retrying` is a retry of a failed attempt).
EVENT_WORDS = {
    "queued": "queued",
    "running": "started",
    "retrying": "retried",
    "succeeded": "succeeded",
    "failed": "failed",
    "cancelled": "cancelled",
    "skipped": "skipped",
}
FINAL_STATES = frozenset({"succeeded", "failed", "cancelled", "skipped"})
#: The narrowest the job-name column of the event lines gets.
NAME_WIDTH = 16


def format_event(at: datetime, state: str, job_name: str, run_id: str, name_width: int = 0) -> str:
    """``HH:MM:SS  <event>  <job name>  <run id>`` (local time of the observer; the event padded to 9,
    the name to ``name_width``)."""
    return f"{at:%H:%M:%S}  {EVENT_WORDS.get(state, state):<9}  {job_name:<{name_width}}  {run_id}"


class RunEventWatcher:
    """Polls the Runs table of ``tenants`` and emits a line for every observed state change."""

    def __init__(
        self,
        *,
        dynamodb: Any,
        runs_table: str,
        jobs_table: str,
        tenants: Iterable[str],
        stop: threading.Event,
        sink: Callable[[str], None] = print,
        interval: float = 0.5,
        window: timedelta = timedelta(minutes=10),
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ):
        self.dynamodb = dynamodb
        self.runs_table = runs_table
        self.jobs_table = jobs_table
        self.tenants = tuple(tenants)
        self.stop_event = stop
        self.sink = sink
        self.interval = interval
        self.window = window
        self.clock = clock
        # tenant -> (job_id, run_key) -> (state, attempt) last seen
        self._seen: dict[str, dict[tuple[str, str], tuple[str, int]]] = {}
        # tenant -> feed item sort key -> the run keys it names (feed items are written once, never
        # changed: each is read once, then only its key is listed)
        self._feed: dict[str, dict[str, list[tuple[str, str]]]] = {}
        self._names: dict[tuple[str, str], str] = {}  # (tenant, job_id) -> job name
        self._name_width = NAME_WIDTH  # grows to the longest name printed, so the columns stay put
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="run-events", daemon=True)
        self._thread.start()

    def join(self, timeout: float) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    def _loop(self) -> None:
        while not self.stop_event.wait(self.interval):
            try:
                self.poll()
            except Exception:
                if not self.stop_event.is_set():
                    log.exception("run event poll failed")

    def poll(self) -> list[str]:
        """One pass over every tenant: emit and return the lines for the changes seen."""
        now = self.clock()
        lines: list[str] = []
        for tenant in self.tenants:
            seen = self._seen.setdefault(tenant, {})
            self._forget_old(seen, now)
            # Runs in the window, plus every run seen unfinished however old (a long backoff, a slow job).
            active = [k for k, (state, _) in seen.items() if state not in FINAL_STATES]
            candidates = dict.fromkeys([*self._recent_keys(tenant, now), *active])
            # A run not seen yet whose instant is still ahead can only be queued (nothing starts before its
            # instant), and would not be reported yet: not read at all, so a burst queued ahead costs
            # the server nothing until it falls due.
            keys = [
                k
                for k in candidates
                if seen.get(k, ("", 0))[0] not in FINAL_STATES
                and (k in seen or scheduled_at_from_run_key(k[1]) <= now)
            ]
            for item in self._get_runs(keys):
                key = (item["job_id"]["S"], item["run_key"]["S"])
                state = item["state"]["S"]
                attempt = int(item.get("attempt", {}).get("N", "0"))
                previous = seen.get(key)
                if previous == (state, attempt):
                    continue
                if previous is None and state == "queued" and scheduled_at_from_run_key(key[1]) > now:
                    continue  # queued ahead of its instant: reported when it falls due, in time order
                seen[key] = (state, attempt)
                if previous is not None and previous[0] == state and state != "running":
                    continue  # only the attempt number moved: not an event of its own
                name = self._job_name(tenant, key[0])
                self._name_width = max(self._name_width, len(name))
                line = format_event(now.astimezone(), state, name, f"{key[0]}.{key[1]}", self._name_width)
                self.sink(line)
                lines.append(line)
        return lines

    def _forget_old(self, seen: dict[tuple[str, str], tuple[str, int]], now: datetime) -> None:
        """Forget finished runs scheduled before the window: they are not listed again, and keeping
        them would grow the watcher by every run the session ever made (36,000 an hour with ten
        per-second jobs)."""
        lower = run_key_for(now - self.window)
        for key in [k for k, (state, _) in seen.items() if state in FINAL_STATES and k[1] < lower]:
            del seen[key]

    def _recent_keys(self, tenant: str, now: datetime) -> list[tuple[str, str]]:
        """The tenant's runs scheduled in the window (and any later), from the feed buckets it spans.

        The feed items of those buckets are listed by key only; the runs of an item not read before
        are read once (``BatchGetItem``). Listing the items whole at every poll made each poll read
        the whole hour's feed: hundreds of kilobytes a second late in an hour with per-second jobs,
        which the emulated DynamoDB spent seconds of its one core answering."""
        lower = run_key_for(now - self.window)
        first_bucket = bucket_of(lower)
        cache = self._feed.setdefault(tenant, {})
        for old in [k for k in cache if k < first_bucket]:
            del cache[old]
        listed: list[str] = []
        kwargs: dict[str, Any] = {
            "TableName": self.runs_table,
            "KeyConditionExpression": "job_id = :p AND run_key >= :lo",
            "ExpressionAttributeValues": {":p": {"S": feed_partition(tenant)}, ":lo": {"S": first_bucket}},
            "ProjectionExpression": "run_key",
        }
        while True:
            page = self.dynamodb.query(**kwargs)
            listed += [item["run_key"]["S"] for item in page.get("Items", [])]
            if "LastEvaluatedKey" not in page:
                break
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        self._read_feed_items(tenant, [k for k in listed if k not in cache], cache)
        keys: dict[tuple[str, str], None] = {}  # ordered set: an entry may be in the feed twice
        for item_key in listed:
            for key in cache.get(item_key, []):
                if key[1] >= lower:
                    keys[key] = None
        return list(keys)

    def _read_feed_items(
        self, tenant: str, item_keys: list[str], cache: dict[str, list[tuple[str, str]]]
    ) -> None:
        partition = feed_partition(tenant)
        for item in self._batch_get(
            [(partition, k) for k in item_keys], {"ProjectionExpression": "run_key, runs"}
        ):
            entries = [entry_key(entry["S"]) for entry in item.get("runs", {}).get("L", [])]
            cache[item["run_key"]["S"]] = [(e["job_id"], e["run_key"]) for e in entries]

    def _get_runs(self, keys: list[tuple[str, str]]) -> list[dict[str, Any]]:
        projection = {
            "ProjectionExpression": "job_id, run_key, #s, attempt",
            "ExpressionAttributeNames": {"#s": "state"},
        }
        return self._batch_get(keys, projection)

    def _batch_get(self, keys: list[tuple[str, str]], projection: dict[str, Any]) -> list[dict[str, Any]]:
        """The Runs table items of ``(job_id, run_key)`` keys, 100 a request, unprocessed keys retried."""
        items: list[dict[str, Any]] = []
        for start in range(0, len(keys), 100):
            request: dict[str, Any] = {
                self.runs_table: {
                    "Keys": [{"job_id": {"S": j}, "run_key": {"S": r}} for j, r in keys[start : start + 100]],
                    **projection,
                }
            }
            while request:
                response = self.dynamodb.batch_get_item(RequestItems=request)
                items += response.get("Responses", {}).get(self.runs_table, [])
                request = response.get("UnprocessedKeys") or {}
        return items

    def _job_name(self, tenant: str, job_id: str) -> str:
        if (tenant, job_id) not in self._names:
            item = self.dynamodb.get_item(
                TableName=self.jobs_table,
                Key={"tenant": {"S": tenant}, "job_id": {"S": job_id}},
                ProjectionExpression="#n",
                ExpressionAttributeNames={"#n": "name"},
            ).get("Item")
            if item is None:
                return job_id  # not cached: the job may simply not be visible yet
            self._names[(tenant, job_id)] = item["name"]["S"]
        return self._names[(tenant, job_id)]
