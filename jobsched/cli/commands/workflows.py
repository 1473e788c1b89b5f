"""`jobsched workflows create|list|get|update|delete|pause|resume|run|backfill|runs|show|cancel|retry`:
DAG workflows over the API (docs/semantics/workflows.md).

A workflow is described by a JSON file, the body of ``POST /workflows`` (``--file wf.json``; flags
``--name``, ``--schedule``, ``--timezone`` override its fields). ``get`` prints the definition with a
text drawing of the DAG; ``show RUN_ID`` prints a workflow run with the drawing of its nodes' states
and a table of the nodes. ``update`` reads the workflow's version and sends ``PATCH`` with
``If-Match`` (``--if-match VERSION`` sends that version instead). ``show --watch`` polls the run until
it ends and exits 1 if it ended ``failed`` or ``cancelled``.
"""

from __future__ import annotations

import argparse
import time
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
from jobsched.client import ApiClient
from jobsched.core.dag import draw, parse_workflow

WORKFLOW_COLUMNS = (
    Column("ID", field("id"), 40),
    Column("NAME", field("name"), 28),
    Column("STATE", field("state"), 9),
    Column("NODES", lambda w: len(w.get("nodes") or []), 5),
    Column("SCHEDULE", field("schedule"), 28),
    Column("NEXT FIRE", lambda w: short_time((w.get("next_fire_times") or [None])[0]), 20),
    Column("VER", field("version"), 5),
)
WORKFLOW_FIELDS = (
    ("id", field("id")),
    ("name", field("name")),
    ("state", field("state")),
    ("version", field("version")),
    ("schedule", field("schedule")),
    ("timezone", field("timezone")),
    ("payload", field("payload")),
    ("misfire", lambda w: f"{w.get('misfire_policy')} (grace {w.get('misfire_grace_seconds')}s)"),
    ("overlap", field("overlap_policy")),
    ("next fires", lambda w: ", ".join(short_time(t) or "" for t in w.get("next_fire_times") or []) or None),
)
RUN_COLUMNS = (
    Column("ID", field("id"), 60),
    Column("STATE", field("state"), 9),
    Column("TRIGGER", field("trigger"), 8),
    Column("SCHEDULED", lambda r: short_time(r.get("scheduled_at")), 20),
    Column("FINISHED", lambda r: short_time(r.get("finished_at")), 20),
    Column("NOTE", lambda r: r.get("error") or r.get("skip_reason"), 50),
)
RUN_FIELDS = (
    ("id", field("id")),
    ("workflow", field("workflow_id")),
    ("state", field("state")),
    ("cancel", lambda r: "requested" if r.get("cancel_requested") and r.get("state") == "running" else OMIT),
    ("trigger", field("trigger")),
    ("scheduled", field("scheduled_at")),
    ("started", field("started_at")),
    ("finished", field("finished_at")),
    ("error", lambda r: r.get("error") or OMIT),
    ("retries", lambda r: len(r["retries"]) if r.get("retries") else OMIT),
)
NODE_COLUMNS = (
    Column("NODE", field("id"), 30),
    Column("STATE", field("state"), 15),
    Column("ATT", field("attempt"), 3),
    Column("STARTED", lambda n: short_time(n.get("started_at")), 20),
    Column("FINISHED", lambda n: short_time(n.get("finished_at")), 20),
    Column("ERROR", field("error"), 50),
)
TERMINAL = frozenset({"succeeded", "failed", "cancelled", "skipped"})


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `workflows` and its subcommands to the `jobsched` parser."""
    workflows = subparsers.add_parser("workflows", help="DAG workflows: define, run, inspect, cancel, retry")
    sub = workflows.add_subparsers(dest="workflows_command", metavar="COMMAND", required=True)
    common = api_options()

    create = sub.add_parser("create", parents=[common], help="create a workflow from a JSON file")
    create.add_argument("--file", required=True, metavar="FILE", help="the POST /workflows body")
    _definition_flags(create)
    create.set_defaults(func=cmd_create)

    lst = sub.add_parser("list", parents=[common], help="list the tenant's workflows")
    lst.add_argument("--limit", type=int)
    lst.add_argument("--cursor")
    lst.set_defaults(func=cmd_list)

    for name, func, text in (
        ("get", cmd_get, "show a workflow and a drawing of its DAG"),
        ("pause", cmd_pause, "pause its schedule (running workflow runs go on)"),
        ("resume", cmd_resume, "resume its schedule"),
        ("runs", cmd_runs, "list its workflow runs, newest first"),
    ):
        parser = sub.add_parser(name, parents=[common], help=text)
        parser.add_argument("workflow_id")
        parser.set_defaults(func=func)
        if name == "runs":
            parser.add_argument("--limit", type=int)
            parser.add_argument("--cursor")

    update = sub.add_parser("update", parents=[common], help="change a workflow (fields of a JSON file)")
    update.add_argument("workflow_id")
    update.add_argument("--file", metavar="FILE", help="a PATCH /workflows/{id} body")
    update.add_argument("--if-match", metavar="VERSION", help="send this version (default: read it first)")
    _definition_flags(update)
    update.set_defaults(func=cmd_update)

    delete = sub.add_parser("delete", parents=[common], help="delete a workflow (its runs stay)")
    delete.add_argument("workflow_id")
    delete.add_argument("--if-match", metavar="VERSION", help="send this version (default: read it first)")
    delete.set_defaults(func=cmd_delete)

    run = sub.add_parser("run", parents=[common], help="start a workflow run now")
    run.add_argument("workflow_id")
    run.add_argument("--payload", metavar="JSON|@FILE", help="the run's workflow_input")
    run.add_argument("--idempotency-key", help="a retried call with the same key reuses the run")
    run.set_defaults(func=cmd_run)

    backfill = sub.add_parser("backfill", parents=[common], help="one workflow run per occurrence")
    backfill.add_argument("workflow_id")
    backfill.add_argument("--from", dest="start", required=True, metavar="ISO8601")
    backfill.add_argument("--to", dest="end", required=True, metavar="ISO8601")
    backfill.set_defaults(func=cmd_backfill)

    show = sub.add_parser("show", parents=[common], help="a workflow run: its DAG with node states")
    show.add_argument("run_id")
    show.add_argument("--watch", action="store_true", help="poll until the workflow run ends")
    show.add_argument("--timeout", type=float, default=300.0, metavar="SECONDS")
    show.add_argument("--interval", type=float, default=1.0, metavar="SECONDS")
    show.set_defaults(func=cmd_show)

    for name, func, text in (
        ("cancel", cmd_cancel, "cancel a workflow run"),
        ("retry", cmd_retry, "retry a failed workflow run from its failed nodes"),
    ):
        parser = sub.add_parser(name, parents=[common], help=text)
        parser.add_argument("run_id")
        parser.set_defaults(func=func)


def _definition_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--name")
    parser.add_argument("--schedule")
    parser.add_argument("--timezone")


def _body(args: argparse.Namespace, required: bool) -> dict[str, Any]:
    body: dict[str, Any] = {}
    if args.file:
        loaded = load_json_arg(args.file if args.file.startswith("@") else "@" + args.file, "--file")
        if not isinstance(loaded, dict):
            raise UsageError("--file must hold a JSON object (a workflow definition)")
        body.update(loaded)
    for key in ("name", "schedule", "timezone"):
        if getattr(args, key) is not None:
            body[key] = getattr(args, key)
    if required and "nodes" not in body:
        raise UsageError('a workflow needs nodes: give --file with a {"nodes": [...]} definition')
    return body


def drawing_of(workflow: dict) -> str:
    """The definition's DAG as text (no states), drawn by the same code as a run's drawing."""
    nodes = workflow.get("nodes") or []
    return draw(parse_workflow({"nodes": nodes})) if nodes else ""


def show_workflow(args: argparse.Namespace, workflow: dict) -> None:
    if args.json:
        print_json(workflow)
        return
    if args.quiet:
        print(workflow.get("id"))
        return
    print(render_fields(workflow, WORKFLOW_FIELDS))
    print()
    print(drawing_of(workflow))


def show_run(args: argparse.Namespace, run: dict) -> None:
    if args.json:
        print_json(run)
        return
    if args.quiet:
        print(run.get("id"))
        return
    print(render_fields(run, RUN_FIELDS))
    print()
    print(run.get("drawing") or "")
    print()
    print(render_table(run.get("nodes") or [], NODE_COLUMNS))


@command
def cmd_create(args: argparse.Namespace, client: ApiClient) -> int:
    show_workflow(args, client.request("POST", "/workflows", body=_body(args, required=True)))
    return 0


@command
def cmd_list(args: argparse.Namespace, client: ApiClient) -> int:
    page = client.request("GET", "/workflows", query={"limit": args.limit, "cursor": args.cursor})
    print_page(page, WORKFLOW_COLUMNS, "workflows", as_json=args.json, quiet=args.quiet)
    return 0


@command
def cmd_get(args: argparse.Namespace, client: ApiClient) -> int:
    show_workflow(args, client.request("GET", f"/workflows/{args.workflow_id}"))
    return 0


@command
def cmd_update(args: argparse.Namespace, client: ApiClient) -> int:
    changes = _body(args, required=False)
    if not changes:
        raise UsageError("nothing to change: give --file or a flag")
    version = args.if_match
    if version is None:
        version = client.request("GET", f"/workflows/{args.workflow_id}")["version"]
    updated = client.request(
        "PATCH", f"/workflows/{args.workflow_id}", body=changes, headers={"If-Match": str(version)}
    )
    show_workflow(args, updated)
    return 0


@command
def cmd_delete(args: argparse.Namespace, client: ApiClient) -> int:
    version = args.if_match
    if version is None:
        version = client.request("GET", f"/workflows/{args.workflow_id}")["version"]
    result = client.request("DELETE", f"/workflows/{args.workflow_id}", headers={"If-Match": str(version)})
    if args.json:
        print_json(result)
    elif not args.quiet:
        print(f"deleted workflow {args.workflow_id}")
    return 0


@command
def cmd_pause(args: argparse.Namespace, client: ApiClient) -> int:
    show_workflow(args, client.request("POST", f"/workflows/{args.workflow_id}/pause", body={}))
    return 0


@command
def cmd_resume(args: argparse.Namespace, client: ApiClient) -> int:
    show_workflow(args, client.request("POST", f"/workflows/{args.workflow_id}/resume", body={}))
    return 0


@command
def cmd_run(args: argparse.Namespace, client: ApiClient) -> int:
    body: dict[str, Any] = {}
    if args.payload is not None:
        payload = load_json_arg(args.payload, "--payload")
        if not isinstance(payload, dict):
            raise UsageError("--payload must be a JSON object")
        body["payload"] = payload
    headers = {"Idempotency-Key": args.idempotency_key} if args.idempotency_key else None
    run = client.request("POST", f"/workflows/{args.workflow_id}/runs", body=body, headers=headers)
    show_run(args, run)
    return 0


@command
def cmd_backfill(args: argparse.Namespace, client: ApiClient) -> int:
    body = {"from": args.start, "to": args.end}
    result = client.request("POST", f"/workflows/{args.workflow_id}/backfill", body=body)
    if args.json:
        print_json(result)
    else:
        page = {"items": result.get("runs") or [], "next_cursor": None}
        print_page(page, RUN_COLUMNS, "workflow runs", as_json=False, quiet=args.quiet)
    return 0


@command
def cmd_runs(args: argparse.Namespace, client: ApiClient) -> int:
    page = client.request(
        "GET", f"/workflows/{args.workflow_id}/runs", query={"limit": args.limit, "cursor": args.cursor}
    )
    print_page(page, RUN_COLUMNS, "workflow runs", as_json=args.json, quiet=args.quiet)
    return 0


@command
def cmd_show(args: argparse.Namespace, client: ApiClient) -> int:
    run = client.request("GET", f"/workflow-runs/{args.run_id}")
    if args.watch:
        deadline = time.monotonic() + args.timeout
        while run.get("state") not in TERMINAL and time.monotonic() < deadline:
            time.sleep(args.interval)
            run = client.request("GET", f"/workflow-runs/{args.run_id}")
    show_run(args, run)
    if args.watch:
        return 0 if run.get("state") == "succeeded" else 1
    return 0


@command
def cmd_cancel(args: argparse.Namespace, client: ApiClient) -> int:
    show_run(args, client.request("POST", f"/workflow-runs/{args.run_id}/cancel", body={}))
    return 0


@command
def cmd_retry(args: argparse.Namespace, client: ApiClient) -> int:
    show_run(args, client.request("POST", f"/workflow-runs/{args.run_id}/retry", body={}))
    return 0
