"""`jobsched jobs create|list|get|update|pause|resume|trigger|backfill|delete|runs|history`: jobs over the
API.

A job can be described with flags (``--name --schedule --handler ...``) or with ``--file job.json``
(the body of ``POST /jobs``); flags given next to ``--file`` override the file's fields. ``update``
takes the same flags (only the fields given change) and handles the version for the user: it reads
the job, sends ``PATCH`` with ``If-Match: <version>``, and when someone changed the job in between
(412) reads it again and re-applies the change, up to :data:`UPDATE_ATTEMPTS` times; with
``--if-match VERSION`` it sends that version once and a changed job fails with ``precondition_failed``.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from jobsched.cli.commands._api_args import UsageError, api_options, command, load_json_arg
from jobsched.cli.commands._output import (
    OMIT,
    Column,
    field,
    print_json,
    print_page,
    render_fields,
    render_table,
    short_time,
)
from jobsched.cli.commands.job_history import add_history_parser
from jobsched.client import ApiClient, ApiError, is_backfill

PRIORITIES = ("high", "default", "low")
POOLS = ("lambda", "long", "container")
MISFIRE_POLICIES = ("run_once", "run_all", "skip")
OVERLAP_POLICIES = ("allow", "skip", "buffer_one", "replace")
DST_GAP = ("shift", "skip")
DST_OVERLAP = ("first", "both")
UPDATE_ATTEMPTS = 3
RETRY_KEYS = ("max_attempts", "base_seconds", "max_seconds")

JOB_COLUMNS = (
    Column("ID", field("id"), 40),
    Column("NAME", field("name"), 28),
    Column("STATE", field("state"), 9),
    Column("SCHEDULE", field("schedule"), 28),
    Column("TZ", field("timezone"), 20),
    Column("NEXT FIRE", lambda job: short_time((job.get("next_fire_times") or [None])[0]), 20),
    Column("VER", field("version"), 5),
)


def _target(job: dict) -> Any:
    target = job.get("target") or {}
    if "handler" in target:
        return target["handler"]
    if "http" in target:
        http = target["http"] or {}
        return f"{http.get('method', 'POST')} {http.get('url')}"
    return target or None


JOB_FIELDS = (
    ("id", field("id")),
    ("name", field("name")),
    ("state", field("state")),
    ("paused note", lambda j: j.get("paused_note") or OMIT),
    ("version", field("version")),
    ("schedule", field("schedule")),
    ("timezone", field("timezone")),
    ("target", _target),
    ("payload", field("payload")),
    ("priority", field("priority")),
    ("pool", field("pool")),
    ("timeout", field("timeout_seconds")),
    ("retry", field("retry")),
    ("misfire", lambda j: f"{j.get('misfire_policy') or '-'} (grace {j.get('misfire_grace_seconds', '-')}s)"),
    ("overlap", field("overlap_policy")),
    ("dst", lambda j: f"gap {j.get('dst_gap') or '-'}, overlap {j.get('dst_overlap') or '-'}"),
    ("jitter", field("jitter_seconds")),
    (
        "deadline",
        lambda j: f"{j['deadline_seconds']}s after each instant" if j.get("deadline_seconds") else OMIT,
    ),
    ("description", lambda j: j.get("description") or OMIT),
    ("notify", lambda j: j.get("notify") or OMIT),
    ("concurrency", lambda j: _limit(j.get("concurrency"), "{limit} at once, key {key}")),
    ("rate limit", lambda j: _limit(j.get("rate_limit"), "{per_second:g}/s, burst {burst}, key {key}")),
    ("next fires", lambda j: ", ".join(short_time(t) or "" for t in j.get("next_fire_times") or []) or None),
)


def _limit(limit: Any, text: str) -> Any:
    return text.format(**limit) if isinstance(limit, dict) and limit else OMIT


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `jobs` and its subcommands to the `jobsched` parser."""
    jobs = subparsers.add_parser("jobs", help="create, list and manage jobs")
    sub = jobs.add_subparsers(dest="jobs_command", metavar="COMMAND", required=True)
    common = api_options()

    create = sub.add_parser("create", parents=[common], help="create a job (POST /jobs)")
    _add_spec_flags(create)
    create.set_defaults(func=cmd_create)

    lst = sub.add_parser("list", parents=[common], help="list jobs, newest first")
    lst.add_argument("--limit", type=int, default=None, help="page size (API default 50, max 200)")
    lst.add_argument("--cursor", help="start at this page (the next_cursor of a previous page)")
    lst.add_argument("--all", action="store_true", help="follow next_cursor through every page")
    lst.set_defaults(func=cmd_list)

    get = sub.add_parser("get", parents=[common], help="show one job")
    get.add_argument("job_id")
    get.set_defaults(func=cmd_get)

    runs = sub.add_parser("runs", parents=[common], help="a job's history, newest first (GET /jobs/ID/runs)")
    runs.add_argument("job_id")
    runs.add_argument(
        "--upcoming",
        action="store_true",
        help="the runs scheduled later instead (queued ahead or withdrawn), soonest first",
    )
    runs.add_argument("--limit", type=int, default=None, help="page size (API default 50, max 200)")
    runs.add_argument("--cursor", help="start at this page (the next_cursor of a previous page)")
    runs.add_argument("--all", action="store_true", help="follow next_cursor through every page")
    runs.set_defaults(func=cmd_runs)
    add_history_parser(sub, common)

    update = sub.add_parser(
        "update",
        parents=[common],
        help="change fields of a job (PATCH /jobs/ID; the version is handled for you)",
        description="Change the fields given; the others keep their values. Without --if-match the "
        "job's current version is read and sent (re-read and re-applied if the job changed meanwhile).",
    )
    update.add_argument("job_id")
    _add_spec_flags(update, patch=True)
    update.add_argument(
        "--if-match", metavar="VERSION", help="only if the job is still at this version (no re-read)"
    )
    update.set_defaults(func=cmd_update)

    pause = sub.add_parser("pause", parents=[common], help="pause a job (withdraws runs queued ahead)")
    pause.add_argument("job_id")
    pause.add_argument("--note", help="why it is paused (shown to others)")
    pause.set_defaults(func=cmd_pause)

    resume = sub.add_parser("resume", parents=[common], help="resume a paused job")
    resume.add_argument("job_id")
    resume.add_argument("--misfire-policy", choices=MISFIRE_POLICIES, help="override for missed runs")
    resume.set_defaults(func=cmd_resume)

    trigger = sub.add_parser("trigger", parents=[common], help="run a job now, outside its schedule")
    trigger.add_argument("job_id")
    trigger.add_argument("--payload", metavar="JSON|@FILE", help="this run's payload instead of the job's")
    trigger.add_argument("--idempotency-key", help="retrying with the same key returns the same run")
    trigger.set_defaults(func=cmd_trigger)

    backfill = sub.add_parser(
        "backfill",
        parents=[common],
        help="one run per occurrence in [--from, --to] (at most 1000; over 100 made in the background: "
        "waits and shows progress unless --no-wait)",
    )
    backfill.add_argument("job_id")
    backfill.add_argument("--from", dest="start", required=True, metavar="ISO8601", help="first instant")
    backfill.add_argument("--to", dest="end", required=True, metavar="ISO8601", help="last instant")
    backfill.add_argument(
        "--idempotency-key", help="repeating with the same key names the same backfill (and resumes it)"
    )
    backfill.add_argument(
        "--no-wait", action="store_true", help="print the background backfill at once, do not wait for it"
    )
    backfill.set_defaults(func=cmd_backfill)

    backfill_show = sub.add_parser(
        "backfill-status", parents=[common], help="a background backfill's progress"
    )
    backfill_show.add_argument("job_id")
    backfill_show.add_argument("backfill_id")
    backfill_show.set_defaults(func=cmd_backfill_status)

    delete = sub.add_parser("delete", parents=[common], help="delete a job")
    delete.add_argument("job_id")
    delete.add_argument("--if-match", metavar="VERSION", help="only if the job is at this version")
    delete.set_defaults(func=cmd_delete)


def _add_spec_flags(parser: argparse.ArgumentParser, *, patch: bool = False) -> None:
    if patch:
        parser.add_argument("--file", "-f", metavar="CHANGES.json", help="the changes as JSON (PATCH body)")
    else:
        parser.add_argument("--file", "-f", metavar="JOB.json", help="the job as JSON (the POST /jobs body)")
    parser.add_argument("--name")
    parser.add_argument("--description")
    parser.add_argument("--schedule", help="cron, @macro, cron(...), rate(...) or at(...)")
    parser.add_argument("--tz", "--timezone", dest="timezone", help="IANA time zone (API default UTC)")
    target = parser.add_mutually_exclusive_group()
    target.add_argument("--handler", help="registered handler name, e.g. demo.echo")
    target.add_argument("--http-url", help="webhook target URL")
    parser.add_argument(
        "--handler-version", type=int, metavar="N", help="pin the handler's version N (default: the newest)"
    )
    parser.add_argument("--http-method", help="webhook method (default POST)")
    parser.add_argument("--http-header", action="append", default=[], metavar="NAME=VALUE", help="repeatable")
    parser.add_argument("--http-timeout-seconds", type=int, help="webhook request timeout")
    parser.add_argument("--payload", metavar="JSON|@FILE", help="the payload object, inline or @file")
    parser.add_argument("--priority", choices=PRIORITIES)
    parser.add_argument(
        "--pool",
        choices=POOLS,
        help="where its runs execute (docs/pools.md); default: container when --timeout-seconds is over "
        "the Lambda limit (900), long for a chunked job, else lambda",
    )
    parser.add_argument(
        "--timeout-seconds", type=int, help="run timeout (up to 900 on lambda and long, 43200 on container)"
    )
    parser.add_argument("--retry-max-attempts", type=int)
    parser.add_argument("--retry-base-seconds", type=float)
    parser.add_argument("--retry-max-seconds", type=float)
    parser.add_argument("--misfire-policy", choices=MISFIRE_POLICIES)
    parser.add_argument("--misfire-grace-seconds", type=int)
    parser.add_argument("--max-catchup", type=int)
    parser.add_argument("--overlap-policy", choices=OVERLAP_POLICIES)
    parser.add_argument("--dst-gap", choices=DST_GAP)
    parser.add_argument("--dst-overlap", choices=DST_OVERLAP)
    parser.add_argument("--jitter-seconds", type=int)
    parser.add_argument(
        "--deadline-seconds",
        type=int,
        metavar="N",
        help="a run not succeeded N s after its instant is reported (0: none)",
    )
    parser.add_argument("--notify-sns-topic-arn", metavar="ARN", help="tell this SNS topic of dead letters")
    parser.add_argument("--notify-webhook", metavar="URL", help="POST dead-letter notifications here")
    parser.add_argument(
        "--concurrency-limit", type=int, metavar="N", help="at most N runs of the key at once"
    )
    parser.add_argument(
        "--concurrency-key", metavar="KEY", help="the key the limit is shared by (default: the job)"
    )
    parser.add_argument(
        "--rate-per-second", type=float, metavar="R", help="at most R runs of the key start a second"
    )
    parser.add_argument("--rate-burst", type=int, metavar="B", help="runs that may start at once (default 1)")
    parser.add_argument(
        "--rate-key", metavar="KEY", help="the key the bucket is shared by (default: the job)"
    )
    if patch:
        parser.add_argument(
            "--no-notify", action="store_true", help="remove the job's notify (the tenant's default applies)"
        )
        parser.add_argument(
            "--no-concurrency", action="store_true", help="remove the job's concurrency limit"
        )
        parser.add_argument("--no-rate-limit", action="store_true", help="remove the job's rate limit")
    if not patch:
        parser.add_argument("--idempotency-key", help="retrying with the same key creates the job once")


def job_spec_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """The ``POST /jobs`` body the flags (over ``--file``) describe; raises UsageError when incomplete."""
    spec = _fields_from_args(args, "the body of POST /jobs")
    missing = [name for name in ("name", "schedule", "target") if not spec.get(name)]
    if missing:
        flags = {"name": "--name", "schedule": "--schedule", "target": "--handler or --http-url"}
        raise UsageError("missing " + ", ".join(flags[m] for m in missing) + " (or give them in --file)")
    return spec


def job_changes_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """The ``PATCH /jobs/ID`` body the flags (over ``--file``) describe; UsageError when it is empty."""
    changes = _fields_from_args(args, "the body of PATCH /jobs/ID")
    if not changes:
        raise UsageError("nothing to change: give the fields to change (--schedule, --payload...) or --file")
    return changes


def _fields_from_args(args: argparse.Namespace, what: str) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if args.file:
        loaded = load_json_arg(args.file if args.file.startswith("@") else "@" + args.file, "--file")
        if not isinstance(loaded, dict):
            raise UsageError(f"--file must hold a JSON object ({what})")
        spec.update(loaded)
    for key in ("name", "description", "schedule", "timezone", "priority", "pool", "timeout_seconds"):
        _put(spec, key, getattr(args, key))
    for key in (
        "misfire_policy",
        "misfire_grace_seconds",
        "max_catchup",
        "overlap_policy",
        "dst_gap",
        "dst_overlap",
    ):
        _put(spec, key, getattr(args, key))
    _put(spec, "jitter_seconds", args.jitter_seconds)
    _put(spec, "deadline_seconds", args.deadline_seconds)
    notify = {
        k: v for k, v in (("sns_topic_arn", args.notify_sns_topic_arn), ("webhook", args.notify_webhook)) if v
    }
    if getattr(args, "no_notify", False):
        if notify:
            raise UsageError("--no-notify cannot go with --notify-sns-topic-arn/--notify-webhook")
        spec["notify"] = {}
    elif notify:
        spec["notify"] = notify
    if args.payload is not None:
        payload = load_json_arg(args.payload, "--payload")
        if not isinstance(payload, dict):
            raise UsageError('--payload must be a JSON object, e.g. \'{"message": "hi"}\'')
        spec["payload"] = payload
    retry = {
        "max_attempts": args.retry_max_attempts,
        "base_seconds": args.retry_base_seconds,
        "max_seconds": args.retry_max_seconds,
    }
    if any(v is not None for v in retry.values()):
        spec["retry"] = {**(spec.get("retry") or {}), **{k: v for k, v in retry.items() if v is not None}}
    _apply_target(spec, args)
    _apply_limits(spec, args)
    return spec


def _apply_limits(spec: dict[str, Any], args: argparse.Namespace) -> None:
    if args.concurrency_limit is not None:
        spec["concurrency"] = {"limit": args.concurrency_limit}
        _put(spec["concurrency"], "key", args.concurrency_key)
    elif args.concurrency_key:
        raise UsageError("--concurrency-key needs --concurrency-limit")
    if args.rate_per_second is not None:
        spec["rate_limit"] = {"per_second": args.rate_per_second}
        _put(spec["rate_limit"], "burst", args.rate_burst)
        _put(spec["rate_limit"], "key", args.rate_key)
    elif args.rate_burst is not None or args.rate_key:
        raise UsageError("--rate-burst/--rate-key need --rate-per-second")
    for flag, key in (("no_concurrency", "concurrency"), ("no_rate_limit", "rate_limit")):
        if getattr(args, flag, False):
            if key in spec:
                raise UsageError(f"--no-{key.replace('_', '-')} cannot go with the flags that set it")
            spec[key] = {}


def _apply_target(spec: dict[str, Any], args: argparse.Namespace) -> None:
    http_flags = (args.http_method, args.http_timeout_seconds, args.http_header)
    if args.handler_version is not None and not args.handler:
        raise UsageError("--handler-version goes with --handler")
    if args.handler:
        if any(http_flags):
            raise UsageError("--http-method/--http-header/--http-timeout-seconds go with --http-url")
        pinned = {} if args.handler_version is None else {"version": args.handler_version}
        spec["target"] = {"handler": args.handler, **pinned}
        return
    if not args.http_url:
        if any(http_flags):
            raise UsageError("--http-method/--http-header/--http-timeout-seconds need --http-url")
        return
    http: dict[str, Any] = {"url": args.http_url, "method": args.http_method or "POST"}
    if args.http_header:
        headers = {}
        for item in args.http_header:
            name, sep, value = item.partition("=")
            if not sep or not name.strip():
                raise UsageError(f"--http-header must be NAME=VALUE, got {item!r}")
            headers[name.strip()] = value
        http["headers"] = headers
    _put(http, "timeout_seconds", args.http_timeout_seconds)
    spec["target"] = {"http": http}


def _put(spec: dict[str, Any], key: str, value: Any) -> None:
    if value is not None:
        spec[key] = value


def show_job(args: argparse.Namespace, job: dict) -> None:
    if args.json:
        print_json(job)
    elif args.quiet:
        print(job.get("id"))
    else:
        print(render_fields(job, JOB_FIELDS))


@command
def cmd_create(args: argparse.Namespace, client: ApiClient) -> int:
    spec = job_spec_from_args(args)
    show_job(args, client.create_job(spec, idempotency_key=args.idempotency_key))
    return 0


@command
def cmd_list(args: argparse.Namespace, client: ApiClient) -> int:
    if args.all:
        items = client.list_all("/jobs", {"limit": args.limit, "cursor": args.cursor})
        page = {"items": items, "next_cursor": None}
    else:
        page = client.list_jobs(limit=args.limit, cursor=args.cursor)
    print_page(page, JOB_COLUMNS, "jobs", as_json=args.json, quiet=args.quiet)
    return 0


@command
def cmd_runs(args: argparse.Namespace, client: ApiClient) -> int:
    from jobsched.cli.commands.runs import RUN_COLUMNS

    upcoming = "true" if args.upcoming else None
    if args.all:
        query = {"limit": args.limit, "cursor": args.cursor, "upcoming": upcoming}
        page = {"items": client.list_all(client.job_runs_path(args.job_id), query), "next_cursor": None}
    else:
        page = client.job_runs(args.job_id, limit=args.limit, cursor=args.cursor, upcoming=upcoming)
    print_page(page, RUN_COLUMNS, "runs", as_json=args.json, quiet=args.quiet)
    return 0


@command
def cmd_get(args: argparse.Namespace, client: ApiClient) -> int:
    show_job(args, client.get_job(args.job_id))
    return 0


@command
def cmd_update(args: argparse.Namespace, client: ApiClient) -> int:
    changes = job_changes_from_args(args)
    if args.if_match is not None:
        show_job(args, client.update_job(args.job_id, changes, version=args.if_match))
        return 0
    for attempt in range(1, UPDATE_ATTEMPTS + 1):
        current = client.get_job(args.job_id)
        try:
            job = client.update_job(args.job_id, _merged(changes, current), version=current["version"])
        except ApiError as exc:
            if exc.code != "precondition_failed" or attempt == UPDATE_ATTEMPTS:
                raise
            continue  # changed by someone else since we read it: read it again, re-apply the change
        show_job(args, job)
        return 0
    raise AssertionError("unreachable")  # the loop returns or raises


def _merged(changes: dict[str, Any], current: dict[str, Any]) -> dict[str, Any]:
    """The PATCH body: ``retry`` is replaced as a whole by the API, so the retry flags given are
    merged into the job's current retry settings (the others keep their values)."""
    if "retry" not in changes:
        return changes
    retry = {k: v for k, v in (current.get("retry") or {}).items() if k in RETRY_KEYS}
    return {**changes, "retry": {**retry, **changes["retry"]}}


@command
def cmd_pause(args: argparse.Namespace, client: ApiClient) -> int:
    result = client.pause_job(args.job_id, note=args.note)
    show_job(args, result)
    withdrawn = result.get("withdrawn_runs") or []
    if args.json or args.quiet:
        return 0
    if withdrawn:
        print(f"\nwithdrew {len(withdrawn)} run(s) queued ahead (now skipped, reason paused):")
        for run_id in withdrawn:
            print(f"  {run_id}")
    else:
        print("\nwithdrew no runs (none was queued ahead)")
    return 0


@command
def cmd_resume(args: argparse.Namespace, client: ApiClient) -> int:
    show_job(args, client.resume_job(args.job_id, misfire_policy=args.misfire_policy))
    return 0


@command
def cmd_trigger(args: argparse.Namespace, client: ApiClient) -> int:
    payload = None
    if args.payload is not None:
        payload = load_json_arg(args.payload, "--payload")
        if not isinstance(payload, dict):
            raise UsageError('--payload must be a JSON object, e.g. \'{"message": "hi"}\'')
    result = client.trigger_job(args.job_id, payload=payload, idempotency_key=args.idempotency_key)
    if args.json:
        print_json(result)
        return 0
    runs = triggered_runs(result)
    for run in runs:
        if args.quiet:
            print(run.get("id"))
        else:
            print(f"triggered job {args.job_id}: run {run.get('id')} ({run.get('state') or 'queued'})")
    if not runs and not args.quiet:
        print(f"triggered job {args.job_id}: no run created")
    return 0


def triggered_runs(result: object) -> list[dict]:
    """The run(s) a trigger created: the API answers with the run (``{"runs": [...]}`` is read too)."""
    if isinstance(result, dict) and isinstance(result.get("runs"), list):
        return [run for run in result["runs"] if isinstance(run, dict)]
    if isinstance(result, dict) and result.get("id"):
        return [result]
    return []


@command
def cmd_backfill(args: argparse.Namespace, client: ApiClient) -> int:
    from jobsched.cli.commands.runs import RUN_COLUMNS

    result = client.backfill_job(
        args.job_id, start=args.start, end=args.end, idempotency_key=args.idempotency_key
    )
    if is_backfill(result):
        return _follow_backfill(args, client, result)
    if args.json:
        print_json(result)
        return 0
    runs = triggered_runs(result)
    if args.quiet:
        for run in runs:
            print(run.get("id"))
        return 0
    print(f"backfilled job {args.job_id}: {len(runs)} run(s) from {args.start} to {args.end}")
    if runs:
        print(render_table(runs, RUN_COLUMNS))
    return 0


@command
def cmd_delete(args: argparse.Namespace, client: ApiClient) -> int:
    version = args.if_match
    if version is None:  # no precondition asked for: delete the version we see now
        version = client.get_job(args.job_id).get("version")
    result = client.delete_job(args.job_id, version=version)
    if args.json:
        print_json(result if result is not None else {"id": args.job_id, "deleted": True})
    else:
        print(f"deleted job {args.job_id}")
    return 0


def backfill_line(record: dict) -> str:
    """``backfill b…: running, 300/1000 decided (300 created, 0 existing, 300 sent)``."""
    return (
        f"backfill {record.get('id')}: {record.get('state')}, {record.get('done')}/{record.get('planned')} "
        f"decided ({record.get('created')} created, {record.get('existing')} existing, "
        f"{record.get('sent')} sent)" + (f": {record['error']}" if record.get("error") else "")
    )


def _follow_backfill(args: argparse.Namespace, client: ApiClient, record: dict) -> int:
    """A background backfill (202): wait for it, a progress line on stderr per change (unless
    ``--no-wait``), then its record (``--json``), its id (``-q``) or a summary line."""
    if not args.no_wait:
        shown: list[tuple[object, object]] = []

        def progress(current: dict) -> None:
            mark = (current.get("state"), current.get("done"))
            if not args.quiet and not args.json and (not shown or shown[-1] != mark):
                shown.append(mark)
                print(backfill_line(current), file=sys.stderr, flush=True)

        record = client.wait_backfill(args.job_id, record["id"], on_progress=progress)
    if args.json:
        print_json(record)
    elif args.quiet:
        print(record.get("id"))
    elif args.no_wait:
        print(backfill_line(record))
        print(f"follow it with: jobsched jobs backfill-status {args.job_id} {record.get('id')}")
    else:
        print(
            f"backfilled job {args.job_id}: {record.get('created', 0) + record.get('existing', 0)} run(s) "
            f"from {args.start} to {args.end} ({backfill_line(record)})"
        )
    return 1 if record.get("state") == "failed" else 0


@command
def cmd_backfill_status(args: argparse.Namespace, client: ApiClient) -> int:
    record = client.get_backfill(args.job_id, args.backfill_id)
    if args.json:
        print_json(record)
    elif args.quiet:
        print(record.get("state"))
    else:
        print(backfill_line(record))
    return 1 if record.get("state") == "failed" else 0
