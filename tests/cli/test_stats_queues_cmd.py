"""`jobsched stats --queues`: the run queues' depth per bucket from ``GET /stats/queues`` (decision 0064)."""

from __future__ import annotations

from jobsched.cli.commands._output import render_table
from jobsched.cli.commands.stats import queue_columns, queue_rows

ANSWER = {
    "start": "2026-12-05T10:00:00Z",
    "end": "2026-12-05T10:03:00Z",
    "bucket": "minute",
    "queues": ["high", "default", "low", "long", "container"],
    "buckets": [
        {
            "start": "2026-12-05T10:00:00Z",
            "samples": 1,
            "queues": {
                "high": {"visible": 0, "in_flight": 2, "delayed": 0},
                "default": {"visible": 340, "in_flight": 200, "delayed": 15},
                "low": {"visible": 3, "in_flight": 0, "delayed": None},
            },
        },
        {"start": "2026-12-05T10:01:00Z", "samples": 0, "queues": {}},
    ],
}


def test_a_row_per_sampled_bucket_with_each_queues_ready_in_flight_and_delayed() -> None:
    rows = queue_rows(ANSWER)
    assert [r["start"] for r in rows] == ["2026-12-05T10:00:00Z"]
    (row,) = rows
    assert (row["samples"], row["high"], row["default"], row["low"]) == (1, "0/2/0", "340/200/15", "3/0/-")
    assert (row["long"], row["container"]) == ("-", "-")
    table = render_table(rows, queue_columns(ANSWER))
    assert table.splitlines()[0].split() == [
        "BUCKET",
        "SAMPLES",
        "HIGH",
        "DEFAULT",
        "LOW",
        "LONG",
        "CONTAINER",
    ]
    assert "340/200/15" in table


def test_empty_lists_the_buckets_no_sweep_sampled_too() -> None:
    rows = queue_rows(ANSWER, empty=True)
    assert [r["samples"] for r in rows] == [1, 0]
    assert rows[1]["default"] == "-"
