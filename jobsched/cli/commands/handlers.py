"""`jobsched handlers [--all]`: the registered handler versions and what refers to each
(``GET /handlers``); `jobsched handlers drain|undrain NAME VERSION`: mark a version draining, or
remove the mark (administrators); `jobsched handlers deploy-checks [record]`: the deploys forced past
the pre-deploy check (administrators). docs/cli.md, docs/api.md "Handler versions".
"""

from __future__ import annotations

import argparse
from typing import Any

from jobsched.cli.commands._api_args import EXIT_OK, UsageError, api_options, command, load_json_arg
from jobsched.cli.commands._output import Column, print_json, render_fields, render_table, short_time
from jobsched.cli.commands._output import field as key
from jobsched.client import ApiClient

COUNTS = ("jobs", "queued", "running", "retrying", "dead_lettered")
HANDLER_COLUMNS = (
    Column("HANDLER", key("name"), 50),
    Column("VERSION", lambda h: "unbound" if h.get("version") is None else h["version"], 7),
    Column("NEWEST", key("newest"), 6),
    Column("STATUS", lambda h: h.get("status", "missing"), 8),
    Column("JOBS", key("jobs"), 5),
    Column("QUEUED", key("queued"), 6),
    Column("RUNNING", key("running"), 7),
    Column("RETRYING", key("retrying"), 8),
    Column("DEAD", key("dead_lettered"), 5),
    Column("UPGRADES_FROM", lambda h: ",".join(str(v) for v in h.get("upgrades_from", [])) or None, 14),
)
VERSION_FIELDS = (
    ("handler", key("name")),
    ("version", key("version")),
    ("status", key("status")),
    ("newest", key("newest")),
    *((name.replace("_", " "), key(name)) for name in COUNTS),
    ("example jobs", lambda h: ", ".join(h.get("examples", {}).get("jobs", [])) or None),
    ("example runs", lambda h: ", ".join(h.get("examples", {}).get("runs", [])) or None),
)
CHECK_COLUMNS = (
    Column("RECORDED", lambda c: short_time(c.get("recorded_at")), 20),
    Column("BY", key("recorded_by"), 60),
    Column("CODE_VERSION", key("code_version"), 40),
    Column("PROBLEMS", lambda c: len(c.get("problems", [])), 8),
)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `handlers` and its subcommands to the `jobsched` parser."""
    common = api_options()
    parser = subparsers.add_parser(
        "handlers", parents=[common], help="handler versions: what refers to each, drain before removal"
    )
    parser.add_argument(
        "--all", action="store_true", help="administrators: count every tenant's jobs and runs"
    )
    parser.set_defaults(func=cmd_list)
    sub = parser.add_subparsers(dest="handlers_command", metavar="COMMAND")
    for name, func, what in (
        ("drain", cmd_drain, "mark a version draining: no new job may pin it (administrators)"),
        ("undrain", cmd_undrain, "remove a version's draining mark (administrators)"),
    ):
        action = sub.add_parser(name, parents=[common], help=what)
        action.add_argument("name", help="the handler's name")
        action.add_argument("version", type=int, help="the version")
        action.set_defaults(func=func)
    checks = sub.add_parser(
        "deploy-checks",
        parents=[common],
        help="the deploys forced past the pre-deploy check (administrators)",
    )
    checks.set_defaults(func=cmd_deploy_checks)
    checks_sub = checks.add_subparsers(dest="deploy_checks_command", metavar="COMMAND")
    record = checks_sub.add_parser(
        "record", parents=[common], help="record a deploy forced past the check by other means (CI)"
    )
    record.add_argument("--code-version", required=True, help="the code version deployed")
    record.add_argument(
        "--problems", default="[]", metavar="JSON", help="what the check refused: a JSON list, or @file"
    )
    record.set_defaults(func=cmd_record)


@command
def cmd_list(args: argparse.Namespace, client: ApiClient) -> int:
    body = client.list_handlers(all_tenants=args.all)
    if args.json:
        print_json(body)
        return EXIT_OK
    rows: list[dict[str, Any]] = [*body.get("handlers", []), *body.get("missing", [])]
    if args.quiet:
        for row in rows:
            print(f"{row['name']}@{row['version'] if row.get('version') is not None else 'unbound'}")
        return EXIT_OK
    print(render_table(rows, HANDLER_COLUMNS) if rows else "no handlers")
    print(f"code version: {body.get('code_version') or '-'}   scope: {body.get('scope')}")
    if body.get("missing"):
        print("rows with status 'missing' name a handler or version this code does not register")
    return EXIT_OK


@command
def cmd_drain(args: argparse.Namespace, client: ApiClient) -> int:
    return _show_version(args, client.drain_handler(args.name, args.version))


@command
def cmd_undrain(args: argparse.Namespace, client: ApiClient) -> int:
    return _show_version(args, client.undrain_handler(args.name, args.version))


@command
def cmd_deploy_checks(args: argparse.Namespace, client: ApiClient) -> int:
    page = client.deploy_checks()
    if args.json:
        print_json(page)
        return EXIT_OK
    items = page.get("items", [])
    print(render_table(items, CHECK_COLUMNS) if items else "no forced deploy-checks")
    return EXIT_OK


@command
def cmd_record(args: argparse.Namespace, client: ApiClient) -> int:
    problems = load_json_arg(args.problems, "--problems")
    if not isinstance(problems, list):
        raise UsageError("--problems must be a JSON list")
    recorded = client.record_deploy_check(args.code_version, problems)
    if args.json:
        print_json(recorded)
    else:
        print(
            f"recorded the forced deploy of {recorded.get('code_version')} at {recorded.get('recorded_at')}"
        )
    return EXIT_OK


def _show_version(args: argparse.Namespace, version: dict[str, Any]) -> int:
    if args.json:
        print_json(version)
    elif args.quiet:
        print(version.get("status"))
    else:
        print(render_fields(version, VERSION_FIELDS))
    return EXIT_OK
