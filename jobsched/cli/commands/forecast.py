"""`jobsched forecast [--tenant T] [--empty]`: runs due per minute for the next hour (``GET /forecast``).

One row per minute and lane (pool, priority) with runs due: the minute (UTC), the runs, the most due
in one second, and the concurrency needed to start them within the deployment's target lag. A tenant
sees its own forecast; an administrator every tenant's, or one with ``--tenant``. ``--empty`` lists
the minutes without runs too; ``--json`` prints the API's answer.
"""

from __future__ import annotations

import argparse

from jobsched.cli.commands._api_args import EXIT_OK, api_options, command
from jobsched.cli.commands._output import Column, print_json, render_table, short_time
from jobsched.cli.commands._output import field as key
from jobsched.client import ApiClient

FORECAST_COLUMNS = (
    Column("MINUTE", key("minute"), 20),
    Column("POOL", key("pool"), 9),
    Column("PRIORITY", key("priority"), 8),
    Column("RUNS", key("runs"), 8),
    Column("BURST", key("burst"), 8),
    Column("NEEDED", key("needed"), 8),
)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `forecast` to the `jobsched` parser."""
    parser = subparsers.add_parser(
        "forecast",
        parents=[api_options()],
        help="runs due per minute for the next hour, per pool and priority",
    )
    parser.add_argument("--tenant", help="administrators: one tenant only")
    parser.add_argument("--empty", action="store_true", help="list minutes without runs too")
    parser.set_defaults(func=cmd_forecast)


def forecast_rows(answer: dict, *, empty: bool = False) -> list[dict]:
    """The table's rows: one per minute and lane with runs (every minute with ``empty``)."""
    rows = []
    for lane in answer.get("lanes", []):
        for i, minute in enumerate(answer.get("minutes", [])):
            if lane["counts"][i] or empty:
                rows.append(
                    {
                        "minute": short_time(minute),
                        "pool": lane["pool"],
                        "priority": lane["priority"],
                        "runs": lane["counts"][i],
                        "burst": lane["bursts"][i],
                        "needed": lane["needed"][i],
                    }
                )
    return sorted(rows, key=lambda r: (r["minute"], r["pool"], r["priority"]))


@command
def cmd_forecast(args: argparse.Namespace, client: ApiClient) -> int:
    answer = client.forecast(args.tenant)
    if args.json:
        print_json(answer)
        return EXIT_OK
    rows = forecast_rows(answer, empty=args.empty)
    print(render_table(rows, FORECAST_COLUMNS) if rows else "no runs due in the next hour")
    if not args.quiet:
        print(f"{answer.get('total', 0)} runs due from {short_time(answer.get('start'))} for 60 minutes")
    return EXIT_OK
