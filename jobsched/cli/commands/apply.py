"""`jobsched apply -f FILE [--dry-run] [--prune]`: declare the tenant's jobs and workflows from a file
(docs/schedules-as-code.md, decision 0060).

Two passes over the API (``PUT /jobs/by-name/{name}``, ``PUT /workflows/by-name/{name}``): first every
entry as a dry run, which checks every definition and works out the diff without writing; if any
entry is refused, each refusal is printed as ``FILE:LINE: jobs[i] "name" FIELD: message`` and nothing
is applied (exit 2). Then, unless ``--dry-run``, every entry is declared for real and the diff printed:

    + created    job       nightly-report
    ~ updated    job       hourly-sync  (payload, schedule)
    = unchanged  workflow  etl
    - deleted    job       old-report

``--prune`` deletes the declared names the file no longer has (``GET /declared``: only names declared
by name, of the caller's tenant; jobs created by ``POST`` are never pruned). Without it they are
listed as ``kept`` (``? kept  job  old-report  (not in the file; --prune deletes it)``). The same file
applied twice prints only ``unchanged`` the second time and writes nothing.
"""

from __future__ import annotations

import argparse
from typing import Any

from jobsched.cli.commands._api_args import EXIT_API_ERROR, EXIT_OK, EXIT_USAGE, api_options, command
from jobsched.cli.commands._output import print_json
from jobsched.cli.declarations import Declarations, Entry, describe, load
from jobsched.client import ApiClient, ApiError

_MARK = {"created": "+", "updated": "~", "unchanged": "=", "deleted": "-", "kept": "?"}


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `apply`."""
    apply = subparsers.add_parser(
        "apply",
        parents=[api_options()],
        help="declare the tenant's jobs and workflows from a YAML file; print the diff",
        description="Create or update each job and workflow the file declares, by name; the same file "
        "again changes nothing.",
    )
    apply.add_argument("-f", "--file", required=True, metavar="FILE", help="the declarations (YAML or JSON)")
    apply.add_argument("--dry-run", action="store_true", help="print the diff and change nothing")
    apply.add_argument(
        "--prune",
        action="store_true",
        help="delete the declared jobs and workflows the file no longer has (never those created by POST)",
    )
    apply.set_defaults(func=cmd_apply)


def _put(client: ApiClient, entry: Entry, dry_run: bool) -> dict[str, Any]:
    put = client.put_workflow_by_name if entry.kind == "workflows" else client.put_job_by_name
    body = {k: v for k, v in entry.body.items() if k != "name"}  # the path names it
    return put(entry.name, body, dry_run=dry_run)


def _refusal(path: str, entry: Entry, error: ApiError) -> str:
    line, field, message = describe(entry, error.message)
    return f"{path}:{line}: {entry.kind}[{entry.index}] {entry.name!r} {field}: {message}"


def _check(client: ApiClient, declared: Declarations) -> tuple[list[dict[str, Any]], list[str]]:
    """Every entry as a dry run: (the answers, the refusals with their lines). A refusal that is not
    about the definition (auth, a server error) is raised."""
    answers, refusals = [], []
    for entry in declared.entries:
        try:
            answers.append(_put(client, entry, dry_run=True))
        except ApiError as error:
            if error.status not in (409, 413, 422):
                raise
            refusals.append(_refusal(declared.path, entry, error))
    return answers, refusals


@command
def cmd_apply(args: argparse.Namespace, client: ApiClient) -> int:
    declared = load(args.file)
    planned, refusals = _check(client, declared)
    if refusals:
        for refusal in refusals:
            print(f"error: {refusal}")
        print(f"{len(refusals)} definition(s) refused; nothing was applied")
        return EXIT_USAGE
    answers = planned
    if not args.dry_run:
        answers = []
        for entry in declared.entries:
            try:
                answers.append(_put(client, entry, dry_run=False))
            except ApiError as error:  # changed since the dry run (a limit reached, a concurrent edit)
                _report(args, _rows(declared, answers))
                print(f"error: {_refusal(declared.path, entry, error)}")
                print("stopped there: the entries above were applied; apply the file again")
                return EXIT_API_ERROR
    rows = _rows(declared, answers)
    status = EXIT_OK
    for item in client.declared()["items"]:
        if item["name"] in declared.names():
            continue
        if not args.prune:
            rows.append(("kept", item["kind"], item["name"], []))
            continue
        if not args.dry_run:
            path = f"/{item['kind']}s/{item['id']}"
            try:
                client.request("DELETE", path, headers={"If-Match": str(item["version"])})
            except ApiError as error:
                print(f"error: {item['kind']} {item['name']!r} not deleted: {error.code}: {error.message}")
                status = EXIT_API_ERROR
                continue
        rows.append(("deleted", item["kind"], item["name"], []))
    _report(args, rows)
    return status


def _rows(declared: Declarations, answers: list[dict[str, Any]]) -> list[tuple[str, str, str, list[str]]]:
    """The diff rows of the entries answered so far (in the file's order)."""
    return [
        (a["outcome"], e.noun, e.name, a.get("changed_fields") or [])
        for e, a in zip(declared.entries, answers, strict=False)
    ]


def _report(args: argparse.Namespace, rows: list[tuple[str, str, str, list[str]]]) -> None:
    if args.json:
        print_json(
            {
                "dry_run": args.dry_run,
                "items": [{"outcome": o, "kind": k, "name": n, "changed_fields": c} for o, k, n, c in rows],
            }
        )
        return
    if args.quiet:
        return
    for outcome, kind, name, changed in rows:
        fields = f"  ({', '.join(changed)})" if changed else ""
        if outcome == "kept":
            fields = "  (not in the file; --prune deletes it)"
        print(f"{_MARK[outcome]} {outcome:<10} {kind:<9} {name}{fields}")
    counts = {o: sum(1 for r in rows if r[0] == o) for o in _MARK}
    summary = ", ".join(f"{n} {o}" for o, n in counts.items() if n)
    if args.dry_run:
        summary += " (dry run: nothing changed)"
    print(summary or "nothing declared")
