"""`jobsched usage [--from DAY] [--to DAY] [--tenant T]`: usage per tenant and day (``GET /usage``).

A tenant sees its own days; an administrator every tenant's (or one, with ``--tenant``), and the
deployment row (tenant ``@deployment``: what serves no tenant). Days are UTC; the default is the last 7
days to today. One row per tenant and day with any usage; the table shows the runs, the Step Functions
transitions (``SFN``), the SNS publishes (``SNS``), the container pool's Fargate vCPU-seconds
(``VCPU_S``) and the estimate; ``--json`` answers every counter.
"""

from __future__ import annotations

import argparse

from jobsched.cli.commands._api_args import EXIT_OK, api_options, command
from jobsched.cli.commands._output import Column, print_page
from jobsched.cli.commands._output import field as key
from jobsched.client import ApiClient

USAGE_COLUMNS = (
    Column("DAY", key("day"), 10),
    Column("TENANT", key("tenant"), 30),
    Column("STARTED", key("runs_started"), 8),
    Column("SUCCEEDED", key("runs_succeeded"), 9),
    Column("FAILED", key("runs_failed"), 6),
    Column("CANCELLED", key("runs_cancelled"), 9),
    Column("DEAD", key("runs_dead_lettered"), 5),
    Column("RUN_SECONDS", key("run_seconds"), 11),
    Column("WAITS", key("throttled_waits"), 6),
    Column("SFN", lambda u: f"{u.get('sfn_transitions', 0):g}", 8),
    Column("SNS", lambda u: f"{u.get('sns_publishes', 0):g}", 6),
    Column("VCPU_S", lambda u: f"{u.get('fargate_vcpu_seconds', 0):g}", 10),
    Column("EST_USD", lambda u: f"{u.get('estimated_usd', 0):.6f}", 10),
)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `usage` to the `jobsched` parser."""
    parser = subparsers.add_parser("usage", parents=[api_options()], help="usage per tenant and day")
    parser.add_argument(
        "--from", dest="start", metavar="YYYY-MM-DD", help="first UTC day (default 6 days ago)"
    )
    parser.add_argument("--to", dest="end", metavar="YYYY-MM-DD", help="last UTC day (default today)")
    parser.add_argument(
        "--tenant", help="administrators: one tenant only, or @deployment (the deployment row alone)"
    )
    parser.set_defaults(func=cmd_usage)


@command
def cmd_usage(args: argparse.Namespace, client: ApiClient) -> int:
    page = client.usage(args.start, args.end, args.tenant)
    print_page(page, USAGE_COLUMNS, "usage days", as_json=args.json, quiet=args.quiet, id_key="day")
    return EXIT_OK
