"""`jobsched runs list|get|cancel|retry|watch|logs`: look at runs and act on them over the API.

``runs logs`` prints the run's log lines, one JSON object per line, oldest first, as the embedded mode
serves them (``GET /runs/{id}/logs``); where that route answers 404 (AWS) it reads the run and prints
its ``logs`` link instead: the CloudWatch log group and the Logs Insights query.

``runs watch`` polls one run (``RUN_ID``) or a job's runs (``--job``) and prints one line per state
transition (``--json``: one JSON object per line) until the watched runs reach terminal states or
``--timeout`` passes. A run that has already finished when the watch starts is shown with its history
(queued, each attempt's start and retry, its end), read from the run record, each line at the time the
record gives. For a job it follows the job's runs that are under way when it starts (due and
queued, running or retrying; scheduled at most a minute before), or, when there are none, the next
run(s) to fall due; runs queued ahead of their instant are not waited for. So it ends even for a
per-second job. Exit 0 when the followed runs ended without a failure, 1 when one ended ``failed`` or
the timeout passed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TextIO

from jobsched.cli.commands._api_args import (
    EXIT_API_ERROR,
    EXIT_OK,
    UsageError,
    api_options,
    command,
    fail,
    load_json_arg,
)
from jobsched.cli.commands._output import (
    OMIT,
    Column,
    print_json,
    print_page,
    render_fields,
    render_table,
    short_time,
)
from jobsched.cli.commands._output import field as key
from jobsched.client import ApiClient, ApiError

RUN_STATES = ("queued", "running", "retrying", "succeeded", "failed", "cancelled", "skipped")
TERMINAL_STATES = frozenset({"succeeded", "failed", "cancelled", "skipped"})
JOB_WATCH_LOOKBACK = timedelta(seconds=60)


def _note(run: dict) -> object:
    """Why a run is where it is: its skip reason or its error, whichever it has."""
    error = run.get("error")
    if isinstance(error, dict):
        error = error.get("message") or error.get("type") or error
    waiting = run.get("waiting_for")
    return run.get("skip_reason") or error or (f"waiting for {waiting}" if waiting else None)


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


def _cancel(run: dict) -> object:
    if not run.get("cancel_requested") or run.get("state") in TERMINAL_STATES:
        return OMIT
    return "requested: the handler sees it within about a second and stops at a safe point"


def _progress(run: dict) -> object:
    progress = run.get("progress")
    if not isinstance(progress, dict):
        return OMIT
    total = progress.get("total")
    unit = progress.get("unit") or "chunks"
    return f"{progress.get('done', 0)}/{total if total is not None else '?'} {unit}"


def handler_at_version(item: dict) -> object:
    """``name@version`` of a run or an attempt (``name`` while unbound; omitted for an HTTP target)."""
    name = item.get("handler")
    if not name:
        return OMIT
    version = item.get("handler_version")
    return f"{name}@{version}" if version is not None else str(name)


RUN_FIELDS = (
    ("id", key("id")),
    ("job", key("job_id")),
    ("state", key("state")),
    ("cancel", _cancel),
    ("trigger", lambda r: r.get("trigger") or OMIT),
    ("handler", handler_at_version),
    ("pool", lambda r: r.get("pool") or OMIT),
    ("scheduled", key("scheduled_at")),
    ("started", key("started_at")),
    ("finished", key("finished_at")),
    ("attempt", key("attempt")),
    ("progress", _progress),
    ("output", key("output")),
    ("error", key("error")),
    ("skip reason", key("skip_reason")),
    ("waiting for", lambda r: r.get("waiting_for") or OMIT),
    ("waiting until", lambda r: r.get("waiting_until") or OMIT),
    ("waits", lambda r: f"{r['waits']} (first {r.get('first_waited_at')})" if r.get("waits") else OMIT),
    ("deadline", lambda r: r.get("deadline_at") or OMIT),
    ("deadline missed", lambda r: r.get("deadline_missed_at") or OMIT),
    ("replays", lambda r: len(r["replays"]) if r.get("replays") else OMIT),
)

ATTEMPT_COLUMNS = (
    Column("ATTEMPT", key("attempt"), 7),
    Column("STARTED", lambda a: short_time(a.get("started_at")), 20),
    Column("FINISHED", lambda a: short_time(a.get("finished_at")), 20),
    Column("HANDLER", lambda a: None if (ran := handler_at_version(a)) is OMIT else ran, 40),
    Column("CODE", key("code_version"), 12),
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
        ("logs", cmd_logs, "print a run's log lines (embedded mode; on AWS its Logs Insights query)"),
    ):
        parser = sub.add_parser(name, parents=[common], help=text)
        parser.add_argument("run_id")
        parser.set_defaults(func=func)
        if name == "retry":
            parser.add_argument("--payload", metavar="JSON|@FILE", help="retry with a corrected payload")

    watch = sub.add_parser("watch", parents=[common], help="follow a run or a job's runs to the end")
    target = watch.add_mutually_exclusive_group(required=True)
    target.add_argument("run_id", nargs="?", help="the run to follow")
    target.add_argument("--job", dest="job_id", help="follow this job's runs instead")
    watch.add_argument(
        "--timeout", type=float, default=300.0, metavar="SECONDS", help="give up after (default 300)"
    )
    watch.add_argument(
        "--interval", type=float, default=1.0, metavar="SECONDS", help="poll period (default 1)"
    )
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
    run = client.cancel_run(args.run_id)
    show_run(args, run)
    if not args.json and not args.quiet and _cancel(run) is not OMIT:
        print(
            f"\ncancel pending: {args.run_id} is still running; it ends `cancelled` once the worker sees "
            f"the request (follow it with: jobsched runs watch {args.run_id})"
        )
    return EXIT_OK


@command
def cmd_logs(args: argparse.Namespace, client: ApiClient) -> int:
    try:
        found = client.get_run_logs(args.run_id)
    except ApiError as exc:
        if exc.status != 404:
            raise
        # Not served here (AWS), or no such run: the run view says where the lines are (or answers 404).
        return _print_log_link(args, client.get_run(args.run_id).get("logs") or {})
    if args.json:
        print_json(found)
        return EXIT_OK
    for line in found.get("items") or []:
        print(json.dumps(line, separators=(",", ":")))
    if found.get("truncated"):
        print(f"(only the first {len(found['items'])} lines)", file=sys.stderr)
    return EXIT_OK


def _print_log_link(args: argparse.Namespace, link: dict) -> int:
    if args.json:
        print_json(link)
        return EXIT_OK
    print(f"log group: {link.get('log_group')}")
    print(f"insights query: {link.get('insights_query')}")
    if link.get("log_group"):
        print(
            f"\nrun it with: aws logs start-query --log-group-name {link['log_group']} "
            "--start-time <epoch s> --end-time <epoch s> --query-string '<the query>'"
        )
    return EXIT_OK


@command
def cmd_retry(args: argparse.Namespace, client: ApiClient) -> int:
    payload = None
    if args.payload is not None:
        payload = load_json_arg(args.payload, "--payload")
        if not isinstance(payload, dict):
            raise UsageError("--payload must be a JSON object")
    show_run(args, client.retry_run(args.run_id, payload=payload))
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
    waiting: dict[str, str | None] = field(default_factory=dict)  # run id -> last waiting_for seen
    _targets: set[str] = field(default_factory=set)  # the job's runs this watch waits for
    _since: str | None = None  # a job watch looks at runs scheduled from a little before it started
    _started: datetime | None = None  # when a job watch started (its first poll)
    _final_at: datetime | None = None  # the instant of the last line of a history (see _history)

    def watch(self, *, timeout: float, interval: float) -> int:
        deadline = self.monotonic() + timeout
        first = True
        while True:
            for run in self._poll(first):
                ended = run.get("state") in TERMINAL_STATES
                if ended and (first if self.run_id else run.get("id") not in self.states):
                    self._history(run)
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
        now = self.now()
        if first:
            self._since = _iso_z(now - JOB_WATCH_LOOKBACK)
        query = {"job_id": self.job_id, "since": self._since, "limit": 200}
        runs = [run for run in self.client.list_all("/runs", query) if _is_due(run, now)]
        if first:
            self._started = now
        if not self._targets:  # the runs under way now, or else the next one(s) to fall due
            self._targets = {r["id"] for r in runs if r.get("state") not in TERMINAL_STATES}
        if not self._targets:  # one that fell due and ended between two polls is the next run too
            ended = [r for r in runs if self._started and _scheduled(r) > self._started]
            if ended:
                self._targets = {min(ended, key=_scheduled)["id"]}
        return [r for r in reversed(runs) if r.get("id") in self._targets]  # oldest first

    def _history(self, run: dict) -> None:
        """The transitions before the end of a run that finished before the watch began, each at the
        instant the run record gives (the final line follows from :meth:`_observe`, at its
        ``finished_at``)."""
        run_id = run.get("id", "?")
        steps: list[tuple[str | None, str, dict]] = [(run.get("scheduled_at"), "queued", {})]
        attempts = [a for a in run.get("attempts") or [] if isinstance(a, dict)]
        for number, attempt in enumerate(attempts, 1):
            at = attempt.get("attempt") or number
            steps.append((attempt.get("started_at"), "running", {"attempt": at}))
            if number < len(attempts):  # a later attempt followed: this one ended in a retry
                error = {"error": attempt.get("error")} if attempt.get("error") else {}
                steps.append((attempt.get("finished_at"), "retrying", {"attempt": at, **error}))
        if run.get("state") == "skipped":
            steps = []
        for at, state, extra in steps:
            self._emit({"id": run_id, "state": state, **extra}, self._at(at))
        self.states[run_id] = "history"
        self._final_at = self._at(run.get("finished_at") or run.get("scheduled_at"))

    def _at(self, value: str | None) -> datetime:
        """An API instant in the watch's time zone; the observation time when there is none."""
        now = self.now()
        if not value:
            return now
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(now.tzinfo)
        except ValueError:
            return now

    def _observe(self, run: dict) -> None:
        run_id, state = run.get("id", "?"), run.get("state", "?")
        waiting = run.get("waiting_for")
        if self.states.get(run_id) == state and self.waiting.get(run_id) == waiting:
            return
        self.states[run_id], self.waiting[run_id] = state, waiting
        at, self._final_at = self._final_at or self.now(), None
        self._emit(run, at)

    def _emit(self, run: dict, at: datetime) -> None:
        state = run.get("state", "?")
        if self.as_json:
            line = {"at": at.isoformat(timespec="seconds"), **run}
            print(json.dumps(line, separators=(",", ":")), file=self.out, flush=True)  # JSON lines
            return
        parts = [at.strftime("%H:%M:%S"), f"{state:<9}", run.get("id", "?")]
        if run.get("attempt"):
            parts.append(f"attempt {run['attempt']}")
        note = _note(run)
        if note and (state in TERMINAL_STATES | {"retrying"} or run.get("waiting_for")):
            parts.append(str(note))
        print("  ".join(parts), file=self.out, flush=True)


def _is_due(run: dict, now: datetime) -> bool:
    """False for a run queued ahead of its scheduled instant (the dispatcher enqueues ahead): a job
    watch waits for runs as they fall due, not for the whole look-ahead."""
    if run.get("state") != "queued" or not run.get("scheduled_at"):
        return True
    try:
        return datetime.fromisoformat(run["scheduled_at"]) <= now
    except ValueError:
        return True


def _scheduled(run: dict) -> datetime:
    """A run's scheduled instant (the distant past if it has none or it does not parse)."""
    try:
        return datetime.fromisoformat(str(run.get("scheduled_at")).replace("Z", "+00:00"))
    except ValueError:
        return datetime.min.replace(tzinfo=UTC)


def _iso_z(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
