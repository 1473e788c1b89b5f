"""Queue depth over time: the samples the sweeper takes of each run queue, and how they add up to the
buckets ``GET /stats/queues`` answers. Pure (docs/decisions/0064-queue-depth-dead-letters-and-phases.md).

Each sweep reads, per run queue (the priorities' and the long and container pools'), SQS's three
approximate counts and keeps them as one sample per minute (:mod:`jobsched.aws.queue_depths`):

- ``visible``: ``ApproximateNumberOfMessages``, ready to be received: the backlog;
- ``in_flight``: ``ApproximateNumberOfMessagesNotVisible``, received and not yet deleted (running, or
  hidden while a run waits for a limit);
- ``delayed``: ``ApproximateNumberOfMessagesDelayed``, sent ahead with ``DelaySeconds`` (runs queued
  before their due instant, retries waiting out their backoff).

A bucket answers, per queue and figure, the highest sample taken in it (``None``: no sample in it, not
zero: the sweeper did not run then), and how many samples it holds.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from jobsched.core.run_stats import StatsRange, minute_of

#: The figures of a sample, with the SQS attribute each is read from.
FIGURES = {
    "visible": "ApproximateNumberOfMessages",
    "in_flight": "ApproximateNumberOfMessagesNotVisible",
    "delayed": "ApproximateNumberOfMessagesDelayed",
}


def sample_attribute(queue: str, figure: str) -> str:
    """The item attribute holding ``figure`` of ``queue`` in a sample (``default_visible``)."""
    return f"{queue}_{figure}"


def depth_buckets(
    span: StatsRange, queues: Sequence[str], samples: Iterable[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """One entry per bucket of ``span``: ``{"start", "samples", "queues": {queue: {figure: max|None}}}``
    from the samples read (``minute`` plus ``<queue>_<figure>`` counts)."""
    starts = span.bucket_starts()
    highest: list[dict[str, dict[str, int | None]]] = [
        {q: dict.fromkeys(FIGURES) for q in queues} for _ in starts
    ]
    counted = [0] * len(starts)
    for sample in samples:
        index = int((minute_of(sample["minute"]) - span.start).total_seconds() // 60) // span.minutes
        if not 0 <= index < len(starts):
            continue
        counted[index] += 1
        for queue in queues:
            for figure in FIGURES:
                value = sample.get(sample_attribute(queue, figure))
                if value is None:
                    continue
                seen = highest[index][queue][figure]
                highest[index][queue][figure] = int(value) if seen is None else max(seen, int(value))
    return [
        {"start": start, "samples": n, "queues": figures}
        for start, n, figures in zip(starts, counted, highest, strict=True)
    ]
