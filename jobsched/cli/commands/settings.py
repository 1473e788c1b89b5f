"""`jobsched settings notify get|set|clear`: the tenant's default recipients of dead-letter notifications.

``GET`` and ``PUT /settings/notify`` for the calling tenant (its identity decides which tenant). A job
whose ``notify`` is empty tells this default when one of its runs is dead-lettered.
"""

from __future__ import annotations

import argparse

from jobsched.cli.commands._api_args import EXIT_OK, UsageError, api_options, command
from jobsched.cli.commands._output import print_json
from jobsched.client import ApiClient


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `settings notify` and its subcommands."""
    settings = subparsers.add_parser("settings", help="the tenant's settings: default dead-letter recipients")
    groups = settings.add_subparsers(dest="settings_command", metavar="COMMAND", required=True)
    notify = groups.add_parser("notify", help="who is told of dead letters when a job names nobody")
    sub = notify.add_subparsers(dest="notify_command", metavar="COMMAND", required=True)
    common = api_options()

    get = sub.add_parser("get", parents=[common], help="show the tenant's default")
    get.set_defaults(func=cmd_get)

    put = sub.add_parser("set", parents=[common], help="replace the tenant's default")
    put.add_argument("--sns-topic-arn", metavar="ARN", help="an SNS topic the deployment allows")
    put.add_argument("--webhook", metavar="URL", help="an http(s) URL POSTed each notification")
    put.set_defaults(func=cmd_set)

    clear = sub.add_parser("clear", parents=[common], help="remove the tenant's default")
    clear.set_defaults(func=cmd_clear)


def _show(args: argparse.Namespace, answer: dict) -> None:
    notify = answer.get("notify") or {}
    if args.json:
        print_json(answer)
    elif not args.quiet:
        if not notify:
            print("notify: nobody (jobs without notify tell no one of their dead letters)")
        for key in ("sns_topic_arn", "webhook"):
            if key in notify:
                print(f"{key}: {notify[key]}")


@command
def cmd_get(args: argparse.Namespace, client: ApiClient) -> int:
    _show(args, client.get_notify_settings())
    return EXIT_OK


@command
def cmd_set(args: argparse.Namespace, client: ApiClient) -> int:
    notify = {k: v for k, v in (("sns_topic_arn", args.sns_topic_arn), ("webhook", args.webhook)) if v}
    if not notify:
        raise UsageError("give --sns-topic-arn and/or --webhook (or use: jobsched settings notify clear)")
    _show(args, client.put_notify_settings(notify))
    return EXIT_OK


@command
def cmd_clear(args: argparse.Namespace, client: ApiClient) -> int:
    _show(args, client.put_notify_settings({}))
    return EXIT_OK
