"""`jobsched dlq list|replay|discard`: the dead letters (runs that failed for good) over the API.

``dlq replay RUN_ID`` replays one dead letter, with its own payload or a corrected one (``--payload``);
``dlq replay --job JOB_ID`` (and/or ``--reason``, ``--error-contains``, ``--since``, ``--until``,
``--max``) replays every dead letter that matches the filter in one call; ``dlq list`` takes the same
filters.
"""

from __future__ import annotations

import argparse

from jobsched.cli.commands._api_args import EXIT_OK, UsageError, api_options, command, load_json_arg
from jobsched.cli.commands._output import Column, print_json, print_page, short_time
from jobsched.cli.commands._output import field as key
from jobsched.client import ApiClient


def _count(name: str):
    """A count for a field that may be a number or a list (attempt history, replay records)."""

    def get(item: dict) -> object:
        value = item.get(name)
        return len(value) if isinstance(value, list) else value

    return get


def _error(item: dict) -> object:
    error = item.get("error")
    if isinstance(error, dict):
        return error.get("message") or error.get("type") or error
    return error


DEAD_LETTER_COLUMNS = (
    Column("RUN ID", key("run_id"), 60),
    Column("JOB", key("job_id"), 36),
    Column("FAILED AT", lambda d: short_time(d.get("failed_at")), 20),
    Column("ATTEMPTS", _count("attempts"), 8),
    Column("REPLAYS", _count("replays"), 7),
    Column("REASON", key("reason"), 13),
    Column("ERROR", _error, 50),
)
REASONS = ("permanent", "exhausted", "lease_expired", "poison", "stranded", "lost")


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `dlq` and its subcommands to the `jobsched` parser."""
    dlq = subparsers.add_parser("dlq", help="list, replay and discard dead letters")
    sub = dlq.add_subparsers(dest="dlq_command", metavar="COMMAND", required=True)
    common = api_options()

    lst = sub.add_parser("list", parents=[common], help="list dead letters, newest first")
    _add_filter_flags(lst)
    lst.add_argument("--limit", type=int, help="page size (API default 50, max 200)")
    lst.add_argument("--cursor", help="start at this page (the next_cursor of a previous page)")
    lst.add_argument("--all", action="store_true", help="follow next_cursor through every page")
    lst.set_defaults(func=cmd_list)

    replay = sub.add_parser("replay", parents=[common], help="run dead letters again")
    replay.add_argument("run_id", nargs="?", help="the dead letter to replay")
    replay.add_argument("--payload", metavar="JSON|@FILE", help="replay with this payload instead")
    _add_filter_flags(replay)
    replay.add_argument("--max", type=int, dest="max_runs", help="by filter: replay at most this many")
    replay.set_defaults(func=cmd_replay)

    discard = sub.add_parser("discard", parents=[common], help="drop a dead letter for good")
    discard.add_argument("run_id")
    discard.set_defaults(func=cmd_discard)


def _add_filter_flags(parser: argparse.ArgumentParser) -> None:
    """The dead-letter filters the API takes, on `list` and on `replay` (combined with AND)."""
    parser.add_argument("--job", dest="job_id", help="only this job's dead letters")
    parser.add_argument("--reason", choices=REASONS, help="only those that failed for this reason")
    parser.add_argument("--error-contains", metavar="TEXT", help="only those whose error contains TEXT")
    parser.add_argument("--since", metavar="ISO8601", help="only those failed at or after")
    parser.add_argument("--until", metavar="ISO8601", help="only those failed before")


def _filters(args: argparse.Namespace, *extra: str) -> dict[str, object]:
    names = ("job_id", "reason", "error_contains", "since", "until", *extra)
    return {name: getattr(args, name) for name in names if getattr(args, name) is not None}


@command
def cmd_list(args: argparse.Namespace, client: ApiClient) -> int:
    query = _filters(args)
    if args.all:
        items = client.list_all("/dead-letters", {"limit": args.limit, "cursor": args.cursor, **query})
        page = {"items": items, "next_cursor": None}
    else:
        page = client.list_dead_letters(limit=args.limit, cursor=args.cursor, **query)
    print_page(
        page, DEAD_LETTER_COLUMNS, "dead letters", as_json=args.json, quiet=args.quiet, id_key="run_id"
    )
    return EXIT_OK


@command
def cmd_replay(args: argparse.Namespace, client: ApiClient) -> int:
    filters = _filters(args, "max_runs")
    if args.run_id and filters:
        raise UsageError("give a RUN_ID, or filter flags (--job, --since...) to replay by filter, not both")
    if args.run_id:
        payload = None if args.payload is None else load_json_arg(args.payload, "--payload")
        if payload is not None and not isinstance(payload, dict):
            raise UsageError("--payload must be a JSON object")
        result = client.replay_dead_letter(args.run_id, payload=payload)
        summary = f"replayed {args.run_id}: run {_run_id(result) or args.run_id} queued"
    elif filters:
        if args.payload is not None:
            raise UsageError("--payload replays one dead letter: give its RUN_ID")
        result = client.replay_dead_letters(filters)
        summary = f"replayed {_replayed_count(result)} dead letter(s)"
        if args.job_id:
            summary += f" of job {args.job_id}"
    else:
        raise UsageError(
            "give the RUN_ID of a dead letter, or filter flags (--job, --since...) to replay by filter"
        )
    if args.json:
        print_json(result)
    else:
        print(summary)
    return EXIT_OK


def _run_id(result: object) -> str | None:
    if isinstance(result, dict):
        return result.get("id") or result.get("run_id")
    return None


def _replayed_count(result: object) -> object:
    if isinstance(result, dict):
        for name in ("count", "replayed"):
            value = result.get(name)
            if value is not None:
                return len(value) if isinstance(value, list) else value
        if isinstance(result.get("items"), list):
            return len(result["items"])
    return "the"


@command
def cmd_discard(args: argparse.Namespace, client: ApiClient) -> int:
    result = client.discard_dead_letter(args.run_id)
    if args.json:
        print_json(result if result is not None else {"run_id": args.run_id, "discarded": True})
    else:
        print(f"discarded dead letter {args.run_id}")
    return EXIT_OK
