"""``jobsched preview EXPR``: print the next fires of a schedule expression.

``--json`` prints exactly one JSON array (the objects of :func:`jobsched.core.preview.preview`);
otherwise a table that marks fires DST moved or doubled.
"""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime

from jobsched.core.errors import ValidationError
from jobsched.core.preview import preview

NOTE_TEXT = {
    "dst_gap_shifted": "* DST gap: moved to the end of the gap",
    "dst_overlap_first": "* DST overlap: first occurrence",
    "dst_overlap_second": "* DST overlap: second occurrence",
}


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``preview`` subcommand."""
    parser = subparsers.add_parser(
        "preview",
        help="show the next fires of a schedule expression",
        description="Show the next fires of a schedule expression, with the DST policy applied.",
    )
    parser.add_argument("expression", metavar="EXPR", help="cron, @macro, cron(...), rate(...) or at(...)")
    parser.add_argument("--tz", default="UTC", help="IANA time zone of the schedule (default UTC)")
    parser.add_argument("--after", help="ISO 8601 instant with an offset or Z (default: now)")
    parser.add_argument("--count", type=int, default=5, help="how many fires (1-1000, default 5)")
    parser.add_argument("--dst-gap", default="shift", help="shift (default) or skip")
    parser.add_argument("--dst-overlap", default="first", help="first (default) or both")
    parser.add_argument("--json", action="store_true", help="print one JSON array")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Compute the preview and print it; ValidationError propagates to the CLI (exit status 2)."""
    after = parse_after(args.after) if args.after else now()
    fires = preview(
        args.expression,
        args.tz,
        after=after,
        count=args.count,
        dst_gap=args.dst_gap,
        dst_overlap=args.dst_overlap,
    )
    if args.json:
        print(json.dumps(fires))
    else:
        print(format_table(fires))
    return 0


def now() -> datetime:
    """The default ``--after``: the current instant (the CLI is the edge where the clock is read)."""
    return datetime.now(UTC)


def parse_after(text: str) -> datetime:
    """An aware datetime from ISO 8601 (``Z`` allowed); a time without an offset is rejected."""
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise ValidationError(f"--after '{text}' is not an ISO 8601 date-time", field="after") from None
    if value.tzinfo is None:
        raise ValidationError(
            f"--after '{text}' has no UTC offset: add 'Z' or an offset such as '+02:00'", field="after"
        )
    return value


def format_table(fires: list[dict]) -> str:
    """A readable table; DST-affected fires are starred and explained."""
    rows = [("#", "at (UTC)", "local", "note")]
    rows += [(str(i), f["at"], f["local"], NOTE_TEXT.get(f["note"], "")) for i, f in enumerate(fires, 1)]
    widths = [max(len(row[col]) for row in rows) for col in range(3)]
    return "\n".join(
        f"{row[0]:>{widths[0]}}  {row[1]:<{widths[1]}}  {row[2]:<{widths[2]}}  {row[3]}".rstrip()
        for row in rows
    )
