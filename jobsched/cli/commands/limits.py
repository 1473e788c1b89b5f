"""`jobsched limits`: the calling tenant's concurrency and rate limits (``GET /limits``).

Each limit shows its value and where it comes from: ``tenant`` (set by an administrator with
``jobsched admin limits set``) or ``default`` (the deployment's). ``none`` is no limit.
"""

from __future__ import annotations

import argparse

from jobsched.cli.commands._api_args import EXIT_OK, api_options, command
from jobsched.cli.commands.admin import _show_limits
from jobsched.client import ApiClient


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `limits` to the `jobsched` parser."""
    parser = subparsers.add_parser(
        "limits", parents=[api_options()], help="this tenant's concurrency and rate limits"
    )
    parser.set_defaults(func=cmd_limits)


@command
def cmd_limits(args: argparse.Namespace, client: ApiClient) -> int:
    _show_limits(args, client.own_limits())
    return EXIT_OK
