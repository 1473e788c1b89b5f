"""Spend caps in the API (issue 32 §3, decision 0062): an administrator sets, reads, lists and clears a
tenant's monthly budget; a tenant reads its own budget and month-to-date spend; bad input is a 4xx
naming the field and writes nothing."""

from __future__ import annotations

import pytest

from jobsched.aws.metering import dynamo_for
from jobsched.aws.usage_store import UsageStore
from jobsched.core.usage import DayUsage
from jobsched.runtime.resources import WORKER_MEMORY_MB
from tests.api.events import ACME, GLOBEX, body_of

OPS = {"authorization": "Bearer tok-root"}


def _add_usage(aws, tenant: str, day: str, **counters) -> float:
    """Add a usage item; returns its estimated_usd as GET /usage prices it."""
    usage = DayUsage(tenant=tenant, day=day, **counters)
    UsageStore(dynamo_for(aws.settings, aws.clients.dynamodb), aws.settings.leases_table).add(usage)
    return usage.estimated_usd(WORKER_MEMORY_MB)


def test_an_administrator_sets_a_budget_and_the_tenant_reads_it_with_its_spend(aws, call):
    # Given acme spent on the 1st and the 2nd of March (today is 2026-03-02), and in February
    march = _add_usage(aws, "acme", "2026-03-01", run_seconds=4000.0, wru=100)
    march += _add_usage(aws, "acme", "2026-03-02", run_seconds=2000.0)
    _add_usage(aws, "acme", "2026-02-28", run_seconds=90000.0)
    # When an administrator sets acme's budget to 0.1 USD
    put = call("PUT", "/admin/tenants/acme/budget", body={"monthly_usd": 0.1}, headers=OPS)
    # Then it answers the budget with the month-to-date spend (February not counted)
    assert put["statusCode"] == 200, put["body"]
    answer = body_of(put)
    assert answer["tenant"] == "acme" and answer["month"] == "2026-03"
    assert answer["monthly_usd"] == 0.1
    assert answer["spent_usd"] == pytest.approx(march, rel=1e-6)
    assert answer["percent_used"] == pytest.approx(round(march / 0.1 * 100, 2))
    assert answer["state"] == ("capped" if march >= 0.1 else "warning" if march >= 0.08 else "ok")
    # And acme reads the same through GET /budget, the administrator through the tenant's path
    assert body_of(call("GET", "/budget", headers=ACME)) == answer
    assert body_of(call("GET", "/admin/tenants/acme/budget", headers=OPS)) == answer


@pytest.mark.parametrize(
    ("used", "state"), [(0.5, "ok"), (0.79, "ok"), (0.81, "warning"), (0.99, "warning"), (1.01, "capped")]
)
def test_the_state_follows_the_spend(aws, call, used, state):
    # Given acme's spend today
    spent = _add_usage(aws, "acme", "2026-03-02", run_seconds=1000.0)
    # When its budget is set so that the spend is `used` of it
    answer = body_of(
        call("PUT", "/admin/tenants/acme/budget", body={"monthly_usd": spent / used}, headers=OPS)
    )
    # Then its state is ok under 80 %, warning from 80 %, capped from 100 %
    assert answer["state"] == state, answer
    assert answer["percent_used"] == pytest.approx(used * 100, abs=0.01)


def test_a_tenant_without_a_budget_reads_state_none(call):
    answer = body_of(call("GET", "/budget", headers=GLOBEX))
    assert answer == {
        "tenant": "globex",
        "month": "2026-03",
        "monthly_usd": None,
        "spent_usd": 0.0,
        "percent_used": None,
        "state": "none",
    }


def test_the_list_has_every_tenant_with_a_budget_and_clearing_removes_it(call):
    call("PUT", "/admin/tenants/globex/budget", body={"monthly_usd": 5}, headers=OPS)
    call("PUT", "/admin/tenants/acme/budget", body={"monthly_usd": 10}, headers=OPS)
    listed = body_of(call("GET", "/admin/tenants/budgets", headers=OPS))["items"]
    assert [(i["tenant"], i["monthly_usd"]) for i in listed] == [("acme", 10.0), ("globex", 5.0)]
    # When acme's budget is cleared, Then 204, acme reads none, and a second clear is 404
    assert call("DELETE", "/admin/tenants/acme/budget", headers=OPS)["statusCode"] == 204
    assert body_of(call("GET", "/budget", headers=ACME))["state"] == "none"
    again = call("DELETE", "/admin/tenants/acme/budget", headers=OPS)
    assert again["statusCode"] == 404
    assert "acme has no budget" in body_of(again)["message"]
    listed = body_of(call("GET", "/admin/tenants/budgets", headers=OPS))["items"]
    assert [i["tenant"] for i in listed] == ["globex"]


@pytest.mark.parametrize(
    "body",
    [
        {"monthly_usd": 0},
        {"monthly_usd": -5},
        {"monthly_usd": 5e-324},
        {"monthly_usd": "10"},
        {"monthly_usd": True},
        {"monthly_usd": 1e12},
        {},
        {"monthly_usd": 10, "tenant": "globex"},
    ],
)
def test_a_bad_budget_is_422_naming_the_field_and_writes_nothing(call, body):
    response = call("PUT", "/admin/tenants/acme/budget", body=body, headers=OPS)
    assert response["statusCode"] == 422, response["body"]
    field = "tenant" if "tenant" in body else "monthly_usd"
    assert field in response["body"]
    assert body_of(call("GET", "/admin/tenants/acme/budget", headers=OPS))["state"] == "none"


def test_a_tenant_may_neither_set_nor_clear_nor_list_budgets(call):
    assert (
        call("PUT", "/admin/tenants/acme/budget", body={"monthly_usd": 1}, headers=ACME)["statusCode"] == 403
    )
    assert call("DELETE", "/admin/tenants/acme/budget", headers=ACME)["statusCode"] == 403
    assert call("GET", "/admin/tenants/budgets", headers=ACME)["statusCode"] == 403
    assert call("GET", "/admin/tenants/globex/budget", headers=ACME)["statusCode"] == 403
    assert body_of(call("GET", "/budget", headers=ACME))["state"] == "none"
