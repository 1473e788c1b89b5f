"""Queue depth samples, one item per minute in the Runs table (decision 0064)::

    job_id  = depth#queues          (job ids never contain '#': no run can share it)
    run_key = <YYYYMMDDTHHMM>       (the UTC minute of the sweep that sampled)
    <queue>_visible, <queue>_in_flight, <queue>_delayed   (per run queue: high, default, low, long, container)
    expires_at = the minute + the retention (the table's TTL)

:meth:`QueueDepths.sample` reads each run queue's approximate counts (one ``GetQueueAttributes`` per
queue, :meth:`jobsched.aws.queues.RunQueues.depths`) and writes them with one ``PutItem`` (about 300
bytes: 1 WRU). Depth is a figure of the deployment's queues, shared by every tenant: it is not kept
per tenant, and only administrators read it (``GET /stats/queues``). :meth:`QueueDepths.samples`
reads a range with one ``Query`` (eventually consistent, paged at 1 MB): one item per sweep, whatever
the number of runs.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from jobsched.aws.queues import QueueReadError
from jobsched.core.queue_depth import FIGURES, sample_attribute
from jobsched.core.run_stats import StatsRange, minute_key, minute_of
from jobsched.ports.stores import RunQueue
from jobsched.ports.tables import Table

logger = logging.getLogger(__name__)

PARTITION = "depth#queues"


class QueueDepths:
    """Samples the run queues' depth into, and reads it from, the Runs table (metered clients)."""

    def __init__(
        self, queues: RunQueue, kinds: Sequence[str], dynamo: Table, table: str, retention: timedelta
    ):
        self.queues = queues
        #: The run queues sampled, in order (the deployment's queue kinds).
        self.kinds = tuple(kinds)
        self.dynamo = dynamo
        self.table = table
        self.retention = retention

    def sample(self, now: datetime) -> int:
        """Read every queue's counts and write them as the sample of ``now``'s minute (a later sample of
        the same minute replaces it); the number of queues read. A queue that cannot be read is left
        out of the sample (logged); none readable: nothing is written."""
        item: dict[str, Any] = {}
        for kind in self.kinds:
            try:
                counts = self.queues.depths(kind)
            except QueueReadError as exc:
                logger.warning("could not read the depth of the %s queue: %s", kind, exc)
                continue
            item.update({sample_attribute(kind, figure): counts[figure] for figure in FIGURES})
        if not item:
            return 0
        minute = minute_key(now)
        expires = minute_of(minute) + self.retention
        self.dynamo.put(
            self.table,
            {"job_id": PARTITION, "run_key": minute, **item, "expires_at": int(expires.timestamp())},
        )
        return len(item) // len(FIGURES)

    def samples(self, span: StatsRange) -> list[dict[str, Any]]:
        """The samples in ``span``: ``{"minute": key, "<queue>_<figure>": n, ...}``, oldest first."""
        items = self.dynamo.query_all(
            self.table,
            "job_id = :p AND run_key BETWEEN :lo AND :hi",
            {":p": PARTITION, ":lo": span.first_key(), ":hi": span.last_key()},
        )
        return [
            {
                "minute": item["run_key"],
                **{k: int(v) for k, v in item.items() if k not in ("job_id", "run_key", "expires_at")},
            }
            for item in items
        ]
