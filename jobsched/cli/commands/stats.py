"""`jobsched stats [--from T] [--to T] [--bucket minute|hour|day] [--empty] [--queues]`: the tenant's runs
per time bucket by outcome, with start lag (``GET /stats``, decision 0061); with ``--queues``, for an
administrator, the run queues' depth per bucket (``GET /stats/queues``, decision 0064).

One row per bucket with runs: its start (UTC), the runs that ended succeeded, failed (of which dead
lettered), cancelled and skipped, and the start lag p50/p99 of its scheduled runs (the upper bound of
the histogram bin they fall in). ``--empty`` lists the buckets without runs too; ``--json`` prints the
API's answer. The range defaults to the last hour of minutes, day of hours or week of days.

``--queues``: one row per bucket a sweep sampled (every bucket with ``--empty``), and per queue
``ready/in flight/delayed``, each the highest sample of the bucket; a tenant gets the API's 403.
"""

from __future__ import annotations

import argparse

from jobsched.cli.commands._api_args import EXIT_OK, api_options, command
from jobsched.cli.commands._output import Column, print_json, render_table, short_time
from jobsched.cli.commands._output import field as key
from jobsched.client import ApiClient

BUCKETS = ("minute", "hour", "day")
OUTCOMES = ("succeeded", "failed", "dead_lettered", "cancelled", "skipped")

STATS_COLUMNS = (
    Column("BUCKET", key("start"), 20),
    Column("SUCCEEDED", key("succeeded"), 9),
    Column("FAILED", key("failed"), 6),
    Column("DEAD", key("dead_lettered"), 6),
    Column("CANCELLED", key("cancelled"), 9),
    Column("SKIPPED", key("skipped"), 7),
    Column("LAG_P50", key("lag_p50"), 7),
    Column("LAG_P99", key("lag_p99"), 7),
)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `stats` to the `jobsched` parser."""
    parser = subparsers.add_parser(
        "stats",
        parents=[api_options()],
        help="runs per minute, hour or day by outcome, with start lag p50/p99",
    )
    parser.add_argument(
        "--from", dest="start", metavar="INSTANT", help="first instant (ISO 8601 with offset)"
    )
    parser.add_argument("--to", dest="end", metavar="INSTANT", help="last instant, exclusive (default now)")
    parser.add_argument("--bucket", choices=BUCKETS, default="minute", help="bucket width (default minute)")
    parser.add_argument("--empty", action="store_true", help="list buckets without runs (or samples) too")
    parser.add_argument(
        "--queues",
        action="store_true",
        help="the run queues' depth per bucket instead (administrators): ready/in flight/delayed",
    )
    parser.set_defaults(func=cmd_stats)


def _lag(value: float | None) -> str:
    return "-" if value is None else f"{value:g}s"


def stats_rows(answer: dict, *, empty: bool = False) -> list[dict]:
    """The table's rows: one per bucket with runs (every bucket with ``empty``)."""
    rows = []
    for bucket in answer.get("buckets", []):
        if empty or any(bucket.get(o) for o in OUTCOMES):
            rows.append(
                {
                    **{o: bucket.get(o, 0) for o in OUTCOMES},
                    "start": short_time(bucket["start"]),
                    "lag_p50": _lag(bucket.get("lag_p50")),
                    "lag_p99": _lag(bucket.get("lag_p99")),
                }
            )
    return rows


def _depth(figures: dict | None) -> str:
    if not figures:
        return "-"
    return "/".join(
        "-" if figures.get(k) is None else str(figures[k]) for k in ("visible", "in_flight", "delayed")
    )


def queue_rows(answer: dict, *, empty: bool = False) -> list[dict]:
    """The ``--queues`` table's rows: one per bucket a sweep sampled (every bucket with ``empty``)."""
    rows = []
    for bucket in answer.get("buckets", []):
        if empty or bucket.get("samples"):
            queues = bucket.get("queues") or {}
            row = {"start": short_time(bucket["start"]), "samples": bucket.get("samples", 0)}
            row.update({name: _depth(queues.get(name)) for name in answer.get("queues", [])})
            rows.append(row)
    return rows


def queue_columns(answer: dict) -> tuple[Column, ...]:
    names = tuple(answer.get("queues", []))
    return (
        Column("BUCKET", key("start"), 20),
        Column("SAMPLES", key("samples"), 7),
        *(Column(name.upper(), key(name), max(len(name), 11)) for name in names),
    )


def cmd_queue_stats(args: argparse.Namespace, client: ApiClient) -> int:
    answer = client.queue_stats(args.start, args.end, args.bucket)
    if args.json:
        print_json(answer)
        return EXIT_OK
    rows = queue_rows(answer, empty=args.empty)
    print(render_table(rows, queue_columns(answer)) if rows else "no queue depth sampled in the range")
    if not args.quiet:
        print(
            f"ready/in flight/delayed, the highest sample of each bucket, from "
            f"{short_time(answer.get('start'))} to {short_time(answer.get('end'))}"
        )
    return EXIT_OK


@command
def cmd_stats(args: argparse.Namespace, client: ApiClient) -> int:
    if args.queues:
        return cmd_queue_stats(args, client)
    answer = client.stats(args.start, args.end, args.bucket)
    if args.json:
        print_json(answer)
        return EXIT_OK
    rows = stats_rows(answer, empty=args.empty)
    print(render_table(rows, STATS_COLUMNS) if rows else "no runs ended in the range")
    if not args.quiet:
        totals = {o: sum(b.get(o, 0) for b in answer.get("buckets", [])) for o in OUTCOMES}
        summary = ", ".join(f"{n} {o.replace('_', ' ')}" for o, n in totals.items())
        print(f"{summary} from {short_time(answer.get('start'))} to {short_time(answer.get('end'))}")
    return EXIT_OK
