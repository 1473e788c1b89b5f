"""`jobsched health`: is the API up, which version, what time does it say (``GET /health``, no auth)."""

from __future__ import annotations

import argparse

from jobsched.cli.commands._api_args import EXIT_OK, api_options, command
from jobsched.cli.commands._output import print_json
from jobsched.client import ApiClient


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``health`` subcommand."""
    parser = subparsers.add_parser("health", parents=[api_options()], help="check that the API answers")
    parser.set_defaults(func=cmd_health)


@command
def cmd_health(args: argparse.Namespace, client: ApiClient) -> int:
    health = client.health()
    if args.json:
        print_json(health)
    elif not args.quiet:
        version, time = health.get("version"), health.get("time")
        print(f"{health.get('status')}: jobsched {version} at {client.base_url}, server time {time}")
    return EXIT_OK
