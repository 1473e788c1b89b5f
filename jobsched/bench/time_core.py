"""`make bench-time`: next-fire throughput of the DST-aware timeline against raw croniter.

For each (expression, zone) both paths enumerate the same number of fires from the same instant in
the same process: ours with :func:`jobsched.core.timeline.iter_fires` (croniter on naive local wall
times plus zoneinfo resolution under the DST policy), raw croniter with an aware start in the zone
(``get_next(datetime)``, its own DST handling). Each path runs ``--repeat`` times; the best run
counts. The goal (issue 2 §5): ours at least half as fast as raw croniter, i.e. ratio >= 0.5.
A third column, croniter on *naive* local times (no DST handling at all), shows our own overhead.

    python -m jobsched.bench.time_core [--json] [--repeat 3] [--scale 1.0]
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from datetime import UTC, datetime
from itertools import islice
from typing import Any
from zoneinfo import ZoneInfo

from croniter import croniter

from jobsched.core.schedules import parse_schedule
from jobsched.core.timeline import iter_fires

START = datetime(2026, 1, 1, tzinfo=UTC)
# (expression, zone, fires): frequent and daily schedules, wall-clock and interval-like, four zones
CASES = [
    ("*/5 * * * *", "America/New_York", 20_000),
    ("*/15 * * * * *", "Europe/London", 20_000),
    ("0 * * * *", "Australia/Lord_Howe", 10_000),
    ("30 2 * * *", "America/New_York", 2_000),
    ("0 9 * * 1-5", "Europe/London", 2_000),
    ("0 0 * * *", "America/Santiago", 2_000),
    ("45 1 * * *", "Australia/Lord_Howe", 2_000),
    ("0 12 1 * *", "UTC", 500),
]


def _ours(expression: str, zone: str, count: int) -> float:
    schedule = parse_schedule(expression, zone)
    begin = time.perf_counter()
    got = sum(1 for _ in islice(iter_fires(schedule, START), count))
    elapsed = time.perf_counter() - begin
    assert got == count, (expression, got)
    return elapsed


def _croniter(expression: str, zone: str, count: int) -> float:
    seconds = len(expression.split()) == 6
    begin = time.perf_counter()
    it = croniter(expression, START.astimezone(ZoneInfo(zone)), second_at_beginning=seconds)
    for _ in range(count):
        it.get_next(datetime)
    return time.perf_counter() - begin


def _croniter_naive(expression: str, zone: str, count: int) -> float:
    """croniter on naive local wall times: what we call internally, without any DST resolution."""
    seconds = len(expression.split()) == 6
    begin = time.perf_counter()
    it = croniter(
        expression, START.astimezone(ZoneInfo(zone)).replace(tzinfo=None), second_at_beginning=seconds
    )
    for _ in range(count):
        it.get_next(datetime)
    return time.perf_counter() - begin


def run(repeat: int = 3, scale: float = 1.0) -> dict:
    """Measure every case; return the figures (fires per second, best of ``repeat``)."""
    rows: list[dict[str, Any]] = []
    for expression, zone, fires in CASES:
        count = max(10, int(fires * scale))
        ours = min(_ours(expression, zone, count) for _ in range(repeat))
        raw = min(_croniter(expression, zone, count) for _ in range(repeat))
        naive = min(_croniter_naive(expression, zone, count) for _ in range(repeat))
        rows.append(
            {
                "expression": expression,
                "zone": zone,
                "fires": count,
                "ours_fires_per_s": round(count / ours),
                "croniter_fires_per_s": round(count / raw),
                "croniter_naive_fires_per_s": round(count / naive),
                "ratio": round(raw / ours, 2),
                "ratio_vs_naive": round(naive / ours, 2),
            }
        )
    total_ours = sum(r["fires"] / r["ours_fires_per_s"] for r in rows)
    total_raw = sum(r["fires"] / r["croniter_fires_per_s"] for r in rows)
    total_naive = sum(r["fires"] / r["croniter_naive_fires_per_s"] for r in rows)
    return {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cases": rows,
        "overall_ratio": round(total_raw / total_ours, 2),
        "overall_ratio_vs_naive": round(total_naive / total_ours, 2),
        "goal_ratio": 0.5,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench_time", description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    parser.add_argument("--repeat", type=int, default=3, help="runs per path; the best counts")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply the number of fires")
    args = parser.parse_args(argv)
    result = run(args.repeat, args.scale)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(
            f"{'expression':<16} {'zone':<20} {'fires':>6} {'ours/s':>9} {'croniter/s':>11} {'ratio':>6}"
            f" {'naive/s':>9} {'ratio':>6}"
        )
        for r in result["cases"]:
            print(
                f"{r['expression']:<16} {r['zone']:<20} {r['fires']:>6} {r['ours_fires_per_s']:>9} "
                f"{r['croniter_fires_per_s']:>11} {r['ratio']:>6} {r['croniter_naive_fires_per_s']:>9} "
                f"{r['ratio_vs_naive']:>6}"
            )
        verdict = "meets" if result["overall_ratio"] >= result["goal_ratio"] else "MISSES"
        print(
            f"overall ratio (croniter time / our time): {result['overall_ratio']} — {verdict} the goal"
            f" >= 0.5; against croniter on naive times (no DST handling): {result['overall_ratio_vs_naive']}"
        )
    return 0 if result["overall_ratio"] >= result["goal_ratio"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
