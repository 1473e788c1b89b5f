"""`jobsched budget`: the calling tenant's monthly budget and spend (``GET /budget``);
`jobsched admin budget list|get|set|clear`: administrators set a tenant's monthly budget in USD
(``/admin/tenants/{tenant}/budget``; docs/semantics/limits.md "Spend caps", decision 0062).

Each shows the budget, the month-to-date spend (the usage items' ``estimated_usd``), the share used
and the state: ``none`` (no budget), ``ok``, ``warning`` (80 % or more: the owners were notified) or
``capped`` (100 % or more: new runs are recorded skipped with reason ``budget``).
"""

from __future__ import annotations

import argparse

from jobsched.cli.commands._api_args import EXIT_OK, api_options, command
from jobsched.cli.commands._output import Column, print_json, print_page, render_fields
from jobsched.cli.commands._output import field as key
from jobsched.client import ApiClient


def _usd(name: str):
    def get(status: dict) -> str:
        value = status.get(name)
        return "none" if value is None else f"{value:.6g} USD"

    return get


def _percent(status: dict) -> str:
    value = status.get("percent_used")
    return "-" if value is None else f"{value:g} %"


BUDGET_COLUMNS = (
    Column("TENANT", key("tenant"), 40),
    Column("MONTHLY", _usd("monthly_usd"), 18),
    Column("SPENT", _usd("spent_usd"), 18),
    Column("USED", _percent, 10),
    Column("STATE", key("state"), 8),
)
BUDGET_FIELDS = (
    ("tenant", key("tenant")),
    ("month", key("month")),
    ("monthly budget", _usd("monthly_usd")),
    ("spent this month", _usd("spent_usd")),
    ("used", _percent),
    ("state", key("state")),
)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `budget` to the `jobsched` parser."""
    parser = subparsers.add_parser(
        "budget", parents=[api_options()], help="this tenant's monthly budget, spend and state"
    )
    parser.set_defaults(func=cmd_budget)


def register_admin(groups: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Add `admin budget list|get|set|clear` to the `admin` group."""
    budget = groups.add_parser("budget", help="a tenant's monthly budget in USD (spend cap)")
    sub = budget.add_subparsers(dest="budget_command", metavar="COMMAND", required=True)
    lst = sub.add_parser("list", parents=[common], help="tenants with a budget, and their spend")
    lst.set_defaults(func=cmd_admin_list)
    get = sub.add_parser("get", parents=[common], help="a tenant's budget and spend")
    get.add_argument("tenant")
    get.set_defaults(func=cmd_admin_get)
    put = sub.add_parser("set", parents=[common], help="set a tenant's monthly budget")
    put.add_argument("tenant")
    put.add_argument(
        "monthly_usd", type=float, help="the budget per UTC month, in USD (0.000001 to 1000000000)"
    )
    put.set_defaults(func=cmd_admin_set)
    clear = sub.add_parser("clear", parents=[common], help="remove a tenant's budget (no spend cap)")
    clear.add_argument("tenant")
    clear.set_defaults(func=cmd_admin_clear)


def _show(args: argparse.Namespace, status: dict) -> None:
    if args.json:
        print_json(status)
    elif args.quiet:
        print(status.get("state"))
    else:
        print(render_fields(status, BUDGET_FIELDS))


@command
def cmd_budget(args: argparse.Namespace, client: ApiClient) -> int:
    _show(args, client.own_budget())
    return EXIT_OK


@command
def cmd_admin_list(args: argparse.Namespace, client: ApiClient) -> int:
    page = client.list_budgets()
    print_page(
        page, BUDGET_COLUMNS, "tenants with a budget", as_json=args.json, quiet=args.quiet, id_key="tenant"
    )
    return EXIT_OK


@command
def cmd_admin_get(args: argparse.Namespace, client: ApiClient) -> int:
    _show(args, client.get_budget(args.tenant))
    return EXIT_OK


@command
def cmd_admin_set(args: argparse.Namespace, client: ApiClient) -> int:
    _show(args, client.put_budget(args.tenant, args.monthly_usd))
    return EXIT_OK


@command
def cmd_admin_clear(args: argparse.Namespace, client: ApiClient) -> int:
    client.delete_budget(args.tenant)
    if args.json:
        print_json({"tenant": args.tenant, "cleared": True})
    elif not args.quiet:
        print(f"tenant {args.tenant} has no budget now (no spend cap)")
    return EXIT_OK
