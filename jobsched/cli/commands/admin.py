"""`jobsched admin principals list|map|unmap`: who may call a deployed API as which tenant.

Behind API Gateway IAM auth, a caller's IAM principal is mapped to a tenant by an administrator (a
principal listed in ``JOBSCHED_ADMIN_PRINCIPALS``; docs/api.md). These commands are that mapping:
``GET``, ``PUT`` and ``DELETE /admin/principals``. A caller who is not an administrator gets
``error: forbidden: ...`` (exit 1).
"""

from __future__ import annotations

import argparse

from jobsched.cli.client import ApiClient
from jobsched.cli.commands._api_args import EXIT_OK, api_options, command
from jobsched.cli.commands._output import Column, print_json, print_page, short_time
from jobsched.cli.commands._output import field as key

PRINCIPAL_COLUMNS = (
    Column("PRINCIPAL", key("principal"), 90),
    Column("TENANT", key("tenant"), 40),
    Column("UPDATED", lambda p: short_time(p.get("updated_at")), 20),
)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `admin principals` and its subcommands to the `jobsched` parser."""
    admin = subparsers.add_parser("admin", help="administrators: map IAM principals to tenants")
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
