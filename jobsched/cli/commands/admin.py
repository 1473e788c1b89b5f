"""`jobsched admin principals list|map|unmap`: who may call a deployed API as which tenant;
`jobsched admin limits list|get|set|clear`: a tenant's concurrency and rate limits;
`jobsched admin budget list|get|set|clear`: a tenant's monthly budget (:mod:`jobsched.cli.commands.budget`).

Behind API Gateway IAM auth, a caller's IAM principal is mapped to a tenant by an administrator (a
principal listed in ``JOBSCHED_ADMIN_PRINCIPALS``; docs/api.md). These commands are that mapping:
``GET``, ``PUT`` and ``DELETE /admin/principals``; the limits are ``/admin/tenants/{tenant}/limits``
(docs/semantics/limits.md). A caller who is not an administrator gets ``error: forbidden: ...``
(exit 1).
"""

from __future__ import annotations

import argparse

from jobsched.cli.commands._api_args import EXIT_OK, UsageError, api_options, command
from jobsched.cli.commands._output import Column, print_json, print_page, render_fields, short_time
from jobsched.cli.commands._output import field as key
from jobsched.cli.commands.budget import register_admin as register_admin_budget
from jobsched.client import ApiClient

PRINCIPAL_COLUMNS = (
    Column("PRINCIPAL", key("principal"), 90),
    Column("TENANT", key("tenant"), 40),
    Column("UPDATED", lambda p: short_time(p.get("updated_at")), 20),
)


def _value(name: str):
    def get(limits: dict) -> str:
        value = limits.get(name)
        return f"{'none' if value is None else f'{value:g}'} ({(limits.get('source') or {}).get(name, '-')})"

    return get


LIMIT_COLUMNS = (
    Column("TENANT", key("tenant"), 40),
    Column("MAX_RUNNING", _value("max_running"), 20),
    Column("RUNS_PER_SECOND", _value("runs_per_second"), 22),
    Column("BURST", lambda t: t.get("burst") if t.get("burst") is not None else "-", 6),
)
LIMIT_FIELDS = (
    ("tenant", key("tenant")),
    ("max running", _value("max_running")),
    ("runs per second", _value("runs_per_second")),
    ("burst", lambda t: t.get("burst") if t.get("burst") is not None else "-"),
)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `admin principals`, `admin limits` and their subcommands to the `jobsched` parser."""
    admin = subparsers.add_parser("admin", help="administrators: map IAM principals to tenants, set limits")
    groups = admin.add_subparsers(dest="admin_command", metavar="COMMAND", required=True)
    principals = groups.add_parser("principals", help="the IAM principal -> tenant mapping")
    sub = principals.add_subparsers(dest="principals_command", metavar="COMMAND", required=True)
    common = api_options()

    lst = sub.add_parser("list", parents=[common], help="list the mappings")
    lst.set_defaults(func=cmd_list)

    put = sub.add_parser("map", parents=[common], help="map a principal to a tenant (replaces its mapping)")
    put.add_argument("principal", help="an IAM ARN (a role ARN covers its sessions), account:ID or org:o-ID")
    put.add_argument("tenant")
    put.set_defaults(func=cmd_map)

    delete = sub.add_parser("unmap", parents=[common], help="remove a principal's mapping")
    delete.add_argument("principal")
    delete.set_defaults(func=cmd_unmap)

    limits = groups.add_parser("limits", help="a tenant's concurrency and rate limits")
    lsub = limits.add_subparsers(dest="limits_command", metavar="COMMAND", required=True)
    llist = lsub.add_parser(
        "list", parents=[common], help="tenants with limits of their own, and the defaults"
    )
    llist.set_defaults(func=cmd_limits_list)
    lget = lsub.add_parser("get", parents=[common], help="a tenant's limits (its own or the defaults)")
    lget.add_argument("tenant")
    lget.set_defaults(func=cmd_limits_get)
    lset = lsub.add_parser("set", parents=[common], help="set a tenant's own limits")
    lset.add_argument("tenant")
    lset.add_argument("--max-running", type=int, metavar="N", help="runs of the tenant executing at once")
    lset.add_argument(
        "--runs-per-second", type=float, metavar="R", help="runs of the tenant started a second"
    )
    lset.add_argument("--burst", type=int, metavar="B", help="runs that may start at once (default 1)")
    lset.set_defaults(func=cmd_limits_set)
    lclear = lsub.add_parser("clear", parents=[common], help="back to the deployment's default limits")
    lclear.add_argument("tenant")
    lclear.set_defaults(func=cmd_limits_clear)
    register_admin_budget(groups, common)


@command
def cmd_list(args: argparse.Namespace, client: ApiClient) -> int:
    page = client.list_principals()
    print_page(page, PRINCIPAL_COLUMNS, "principals", as_json=args.json, quiet=args.quiet, id_key="principal")
    return EXIT_OK


@command
def cmd_map(args: argparse.Namespace, client: ApiClient) -> int:
    mapping = client.map_principal(args.principal, args.tenant)
    if args.json:
        print_json(mapping)
    elif args.quiet:
        print(mapping.get("principal"))
    else:
        print(f"mapped {mapping.get('principal')} to tenant {mapping.get('tenant')}")
    return EXIT_OK


@command
def cmd_unmap(args: argparse.Namespace, client: ApiClient) -> int:
    client.unmap_principal(args.principal)
    if args.json:
        print_json({"principal": args.principal, "unmapped": True})
    elif not args.quiet:
        print(f"unmapped {args.principal}")
    return EXIT_OK


@command
def cmd_limits_list(args: argparse.Namespace, client: ApiClient) -> int:
    page = client.list_tenant_limits()
    print_page(
        page, LIMIT_COLUMNS, "tenants with limits", as_json=args.json, quiet=args.quiet, id_key="tenant"
    )
    if not args.json and not args.quiet:
        defaults = page.get("defaults") or {}
        print("defaults: " + ", ".join(f"{k} {'none' if v is None else v}" for k, v in defaults.items()))
    return EXIT_OK


def _show_limits(args: argparse.Namespace, limits: dict) -> None:
    if args.json:
        print_json(limits)
    elif args.quiet:
        print(limits.get("tenant"))
    else:
        print(render_fields(limits, LIMIT_FIELDS))


@command
def cmd_limits_get(args: argparse.Namespace, client: ApiClient) -> int:
    _show_limits(args, client.get_tenant_limits(args.tenant))
    return EXIT_OK


@command
def cmd_limits_set(args: argparse.Namespace, client: ApiClient) -> int:
    body = {
        name: value
        for name, value in (
            ("max_running", args.max_running),
            ("runs_per_second", args.runs_per_second),
            ("burst", args.burst),
        )
        if value is not None
    }
    if "max_running" not in body and "runs_per_second" not in body:
        raise UsageError("give --max-running and/or --runs-per-second (clear goes back to the defaults)")
    _show_limits(args, client.put_tenant_limits(args.tenant, body))
    return EXIT_OK


@command
def cmd_limits_clear(args: argparse.Namespace, client: ApiClient) -> int:
    client.delete_tenant_limits(args.tenant)
    if args.json:
        print_json({"tenant": args.tenant, "cleared": True})
    elif not args.quiet:
        print(f"tenant {args.tenant} is back to the default limits")
    return EXIT_OK
