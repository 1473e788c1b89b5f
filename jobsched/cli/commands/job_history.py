"""`jobsched jobs history JOB_ID`: a job's history as a grid (``GET /jobs/{id}/history``, decision 0063).

Prints one character per cell, oldest first — the same cells the console's grid draws — with ``|``
where the zone's UTC offset changed and ``.`` for each upcoming fire, then the cells as a table, the
offset changes, the upcoming fires and, for a paused job, what a resume would do under each misfire
policy. ``--json`` prints the API's answer as it is.
"""

from __future__ import annotations

import argparse
import sys

from jobsched.cli.commands._api_args import command
from jobsched.cli.commands._output import Column, field, print_json, render_table, short_time
from jobsched.client import ApiClient

#: The grid's character per state, and per skip reason for skipped records (upper case: a summary
#: record standing for many occurrences).
STATE_MARKS = {
    "succeeded": "+",
    "failed": "X",
    "cancelled": "c",
    "running": "R",
    "queued": "q",
    "retrying": "r",
}
SKIP_MARKS = {
    "misfire": "m",
    "overlap": "o",
    "dst_gap": "g",
    "paused": "p",
    "rescheduled": "s",
    "replaced": "x",
    "deleted": "d",
    "budget": "b",
}
OTHER_SKIP = "-"
UPCOMING_MARK = "."
CHANGE_MARK = "|"

CELL_COLUMNS = (
    Column("SCHEDULED", lambda c: short_time(c.get("scheduled_at")), 20),
    Column("LOCAL", lambda c: (c.get("local") or "")[:19].replace("T", " "), 19),
    Column("OFFSET", lambda c: offset_text(c.get("utc_offset_seconds") or 0), 9),
    Column("STATE", field("state"), 9),
    Column("TRIGGER", field("trigger"), 8),
    Column("REASON", lambda c: skip_text(c), 44),
    Column("RUN", field("run_id"), 60),
)
UPCOMING_COLUMNS = (
    Column("AT", lambda f: short_time(f.get("at")), 20),
    Column("LOCAL", lambda f: (f.get("local") or "")[:19].replace("T", " "), 19),
    Column("NOTE", field("note"), 20),
)
RESUME_COLUMNS = (
    Column("POLICY", lambda p: p["policy"] + (" (job's)" if p.get("job_default") else ""), 18),
    Column("RUNS", field("runs_count"), 6),
    Column("SKIPPED", lambda p: _skipped_text(p), 64),
    Column("FIRST RUN", lambda p: short_time((p.get("runs") or [{}])[0].get("at")), 20),
    Column("THEN NEXT", lambda p: short_time(p.get("next_at")), 20),
    Column("COMPLETE", lambda p: p.get("complete"), 8),
)


def add_history_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    history = sub.add_parser(
        "history",
        parents=[common],
        help="a job's history as a grid, with its next fires and a paused job's resume preview "
        "(GET /jobs/ID/history)",
    )
    history.add_argument("job_id")
    history.add_argument(
        "--until", help="records scheduled at or before this instant, with an offset or Z (default: now)"
    )
    history.add_argument("--limit", type=int, default=None, help="cells per page (API default 100, max 200)")
    history.add_argument("--cursor", help="the next (older) page: the next_cursor of a previous page")
    history.add_argument("--upcoming", type=int, default=None, help="next fires to show (default 10, max 50)")
    history.set_defaults(func=cmd_history)


def offset_text(seconds: int) -> str:
    sign = "-" if seconds < 0 else "+"
    minutes = abs(seconds) // 60
    return f"UTC{sign}{minutes // 60:02d}:{minutes % 60:02d}"


def skip_text(cell: dict) -> str | None:
    reason = cell.get("skip_reason")
    if cell.get("state") != "skipped":
        return cell.get("error")
    if cell.get("skipped_count"):
        return f"{reason} ×{cell['skipped_count']} to {short_time(cell.get('skipped_until'))}"
    return reason


def mark(cell: dict) -> str:
    """The grid character of one cell."""
    if cell.get("state") != "skipped":
        return STATE_MARKS.get(cell.get("state") or "", "?")
    letter = SKIP_MARKS.get(cell.get("skip_reason") or "", OTHER_SKIP)
    return letter.upper() if cell.get("skipped_count") else letter


def grid_line(body: dict) -> str:
    """The cells' and upcoming fires' characters, oldest first, ``|`` before the first instant of each
    offset change."""
    changes = sorted(c["at"] for c in body.get("dst_changes") or [])
    instants = [(c["scheduled_at"], mark(c)) for c in body.get("cells") or []]
    instants += [(f["at"], UPCOMING_MARK) for f in body.get("upcoming") or []]
    line: list[str] = []
    pending = list(changes)
    for at, char in instants:
        while pending and pending[0] <= at:
            pending.pop(0)
            if line:
                line.append(CHANGE_MARK)
        line.append(char)
    return "".join(line)


def _skipped_text(outcome: dict) -> str:
    skipped = outcome.get("skipped") or {}
    if not skipped:
        return "0"
    parts = ", ".join(f"{n} {reason}" for reason, n in sorted(skipped.items()))
    return f"{parts} ({short_time(outcome.get('skipped_first'))}..{short_time(outcome.get('skipped_last'))})"


def legend() -> str:
    states = "  ".join(f"{m} {s}" for s, m in STATE_MARKS.items())
    skips = "  ".join(f"{m} {r}" for r, m in SKIP_MARKS.items())
    return (
        f"legend: {states}\n        skipped: {skips}  {OTHER_SKIP} other (upper case: a summary of many)\n"
        f"        {UPCOMING_MARK} upcoming  {CHANGE_MARK} UTC offset change (DST)"
    )


@command
def cmd_history(args: argparse.Namespace, client: ApiClient) -> int:
    body = client.job_history(
        args.job_id, until=args.until, limit=args.limit, cursor=args.cursor, upcoming=args.upcoming
    )
    if args.json:
        print_json(body)
        return 0
    cells = body.get("cells") or []
    fires = body.get("upcoming") or []
    print(
        f"job {body.get('job_id')} ({body.get('timezone')}), {body.get('state')}: {len(cells)} records "
        f"up to {short_time(body.get('until'))}, oldest first"
        + (f", then {len(fires)} upcoming" if fires else "")
    )
    print(grid_line(body) or "(nothing)")
    print(legend())
    if cells:
        print()
        print(render_table(cells, CELL_COLUMNS))
    for change in body.get("dst_changes") or []:
        print(
            f"offset change at {short_time(change['at'])}: {offset_text(change['before_seconds'])} -> "
            f"{offset_text(change['after_seconds'])}"
        )
    if fires:
        print("\nupcoming:")
        print(render_table(fires, UPCOMING_COLUMNS))
    if body.get("resume_preview"):
        print("\nif resumed now (POST /jobs/ID/resume, optionally with a misfire policy):")
        print(render_table(body["resume_preview"], RESUME_COLUMNS))
    if body.get("next_cursor"):
        print(f"older records: add --cursor {body['next_cursor']}", file=sys.stderr)
    return 0
