"""`jobsched runs list|get|cancel|retry|watch`: look at runs and act on them over the API.

``runs watch`` polls one run (``RUN_ID``) or a job's runs (``--job``) and prints one line per state
transition (``--json``: one JSON object per line) until the watched runs reach terminal states or
``--timeout`` passes. For a job it follows
the runs that were not finished when the watch started plus every run that appears while it watches,
and ends once at least one was seen and all of them are finished. Exit 0 when they ended without a
failure, 1 when one ended ``failed`` or the timeout passed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TextIO

from jobsched.client import ApiClient
from jobsched.commands._api_args import EXIT_API_ERROR, EXIT_OK, api_options, command, fail
from jobsched.commands._output import (
    Column,
    print_json,
    print_page,
    render_fields,
    render_table,
    short_time,
)
from jobsched.commands._output import field as key

RUN_STATES = ("queued", "running", "retrying", "succeeded", "failed", "cancelled", "skipped")
TERMINAL_STATES = frozenset({"succeeded", "failed", "cancelled", "skipped"})


def _note(run: dict) -> object:
    """Why a run is where it is: its skip reason or its error, whichever it has."""
    error = run.get("error")
    if isinstance(error, dict):
        error = error.get("message") or error.get("type") or error
    return run.get("skip_reason") or error


RUN_COLUMNS = (
    Column("ID", key("id"), 60),
    Column("JOB", key("job_id"), 36),
    Column("STATE", key("state"), 9),
    Column("SCHEDULED", lambda r: short_time(r.get("scheduled_at")), 20),
    Column("STARTED", lambda r: short_time(r.get("started_at")), 20),
    Column("FINISHED", lambda r: short_time(r.get("finished_at")), 20),
    Column("ATT", key("attempt"), 3),
    Column("NOTE", _note, 40),
)

RUN_FIELDS = (
    ("id", key("id")),
    ("job", key("job_id")),
    ("state", key("state")),
    ("scheduled", key("scheduled_at")),
    ("started", key("started_at")),
    ("finished", key("finished_at")),
    ("attempt", key("attempt")),
    ("output", key("output")),
    ("error", key("error")),
    ("skip reason", key("skip_reason")),
)

ATTEMPT_COLUMNS = (
    Column("ATTEMPT", key("attempt"), 7),
    Column("STARTED", lambda a: short_time(a.get("started_at")), 20),
    Column("FINISHED", lambda a: short_time(a.get("finished_at")), 20),
    Column("OUTCOME", key("outcome"), 12),
    Column("ERROR", key("error"), 60),
)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `runs` and its subcommands to the `jobsched` parser."""
    runs = subparsers.add_parser("runs", help="list, inspect, cancel, retry and watch runs")
    sub = runs.add_subparsers(dest="runs_command", metavar="COMMAND", required=True)
    common = api_options()

    lst = sub.add_parser("list", parents=[common], help="list runs, newest first")
    lst.add_argument("--job", dest="job_id", help="only this job's runs")
    lst.add_argument("--state", choices=RUN_STATES, help="only runs in this state")
    lst.add_argument("--since", metavar="ISO8601", help="only runs scheduled at or after this instant")
    lst.add_argument("--limit", type=int, help="page size (API default 50, max 200)")
    lst.add_argument("--cursor", help="start at this page (the next_cursor of a previous page)")
    lst.add_argument("--all", action="store_true", help="follow next_cursor through every page")
    lst.set_defaults(func=cmd_list)

    for name, func, text in (
        ("get", cmd_get, "show one run and its attempts"),
        ("cancel", cmd_cancel, "cancel a queued or running run"),
        ("retry", cmd_retry, "run a failed run again"),
    ):
        parser = sub.add_parser(name, parents=[common], help=text)
        parser.add_argument("run_id")
        parser.set_defaults(func=func)

    watch = sub.add_parser("watch", parents=[common], help="follow a run or a job's runs to the end")
    target = watch.add_mutually_exclusive_group(required=True)
    target.add_argument("run_id", nargs="?", help="the run to follow")
    target.add_argument("--job", dest="job_id", help="follow this job's runs instead")
    watch.add_argument("--timeout", type=float, default=300.0, metavar="SECONDS", help="give up after")
    watch.add_argument("--interval", type=float, default=1.0, metavar="SECONDS", help="poll period")
    watch.set_defaults(func=cmd_watch)


@command
def cmd_list(args: argparse.Namespace, client: ApiClient) -> int:
    query = {"job_id": args.job_id, "state": args.state, "since": args.since}
    query = {k: v for k, v in query.items() if v is not None}
    if args.all:
        items = client.list_all("/runs", {"limit": args.limit, "cursor": args.cursor, **query})
        page = {"items": items, "next_cursor": None}
    else:
        page = client.list_runs(limit=args.limit, cursor=args.cursor, **query)
    print_page(page, RUN_COLUMNS, "runs", as_json=args.json, quiet=args.quiet)
    return EXIT_OK


def show_run(args: argparse.Namespace, run: dict) -> None:
    if args.json:
        print_json(run)
        return
    if args.quiet:
        print(run.get("id"))
        return
    print(render_fields(run, RUN_FIELDS))
    attempts = run.get("attempts") or []
    if attempts:
        print()
        print(render_table(attempts, ATTEMPT_COLUMNS))


@command
def cmd_get(args: argparse.Namespace, client: ApiClient) -> int:
    show_run(args, client.get_run(args.run_id))
    return EXIT_OK


@command
def cmd_cancel(args: argparse.Namespace, client: ApiClient) -> int:
    show_run(args, client.cancel_run(args.run_id))
    return EXIT_OK


@command
def cmd_retry(args: argparse.Namespace, client: ApiClient) -> int:
    show_run(args, client.retry_run(args.run_id))
    return EXIT_OK


@command
def cmd_watch(args: argparse.Namespace, client: ApiClient) -> int:
    watcher = RunWatcher(client, run_id=args.run_id, job_id=args.job_id, as_json=args.json)
    return watcher.watch(timeout=args.timeout, interval=args.interval)


@dataclass
class RunWatcher:
    """Polls the API and reports run state transitions; the clock and sleep are injectable for tests."""

    client: ApiClient
    run_id: str | None = None
    job_id: str | None = None
    as_json: bool = False
    out: TextIO = field(default_factory=lambda: sys.stdout)
    sleep: Callable[[float], None] = time.sleep
    monotonic: Callable[[], float] = time.monotonic
    now: Callable[[], datetime] = field(default=lambda: datetime.now().astimezone())
    states: dict[str, str] = field(default_factory=dict)  # run id -> last state seen
    _ignored: set[str] = field(default_factory=set)  # a job's runs already finished at the start

    def watch(self, *, timeout: float, interval: float) -> int:
        deadline = self.monotonic() + timeout
        first = True
        while True:
            for run in self._poll(first):
                self._observe(run)
            first = False
            if self.states and all(s in TERMINAL_STATES for s in self.states.values()):
                failed = sorted(r for r, s in self.states.items() if s == "failed")
                if failed:
                    return fail("run_failed", f"{len(failed)} run(s) failed: {', '.join(failed)}", 1)
                return EXIT_OK
            if self.monotonic() + interval > deadline:
                what = self.run_id or f"the runs of job {self.job_id}"
                return fail("timeout", f"{what} not finished after {timeout:g}s", EXIT_API_ERROR)
            self.sleep(interval)

    def _poll(self, first: bool) -> list[dict]:
        if self.run_id:
            return [self.client.get_run(self.run_id)]
        runs = self.client.list_runs(job_id=self.job_id, limit=50).get("items") or []
        if first:  # history: runs that had already finished are not what the user waits for
            self._ignored = {r["id"] for r in runs if r.get("state") in TERMINAL_STATES}
        return [r for r in reversed(runs) if r.get("id") not in self._ignored]  # oldest first

    def _observe(self, run: dict) -> None:
        run_id, state = run.get("id", "?"), run.get("state", "?")
        if self.states.get(run_id) == state:
            return
        self.states[run_id] = state
        if self.as_json:
            line = {"at": self.now().isoformat(timespec="seconds"), **run}
            print(json.dumps(line, separators=(",", ":")), file=self.out, flush=True)  # JSON lines
            return
        parts = [self.now().strftime("%H:%M:%S"), f"{state:<9}", run_id]
        if run.get("attempt"):
            parts.append(f"attempt {run['attempt']}")
        note = _note(run)
        if note and state in TERMINAL_STATES | {"retrying"}:
            parts.append(str(note))
        print("  ".join(parts), file=self.out, flush=True)
