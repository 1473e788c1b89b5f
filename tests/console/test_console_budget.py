"""The Overview's "Budget" section (decision 0062): the tenant's monthly budget, its spend this month,
the share used and the state, read from GET /budget, in a table a screen reader reads; a trigger
refused because the tenant is over its budget (409 budget_exhausted) shows the API's message."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytest.importorskip("playwright.sync_api", reason="playwright is not installed (requirements-dev.txt)")
from playwright.sync_api import expect

from jobsched.cli.client import ApiClient
from tests.console.conftest import TOKENS, running_dev
from tests.local.conftest import wait_for
from tests.local.devproc import DevProcess


@pytest.fixture(scope="module")
def dev() -> Iterator[DevProcess]:
    """Given a real ``jobsched dev`` whose tenant alpha is also an administrator."""
    with running_dev("--admin", "alpha") as process:
        yield process


def test_the_overview_shows_the_budget_spend_and_state(console, dev) -> None:
    # Given alpha's budget set to 5 USD by an administrator, and beta with none
    ApiClient(dev.url, token=TOKENS["alpha"], timeout=30).put_budget("alpha", 5)
    tab = console()
    tab.sign_in("alpha")
    # When alpha opens the Overview, Then "Budget" lists the budget, the spend and the state
    section = tab.page.get_by_role("region", name="Budget")
    table = section.get_by_role("table", name="Monthly budget and spend")
    expect(table.get_by_role("row", name="monthly budget 5.000000 USD")).to_be_visible()
    expect(table.get_by_role("row", name="state ok")).to_be_visible()
    expect(section.get_by_text("Under 80 % of the budget.")).to_be_visible()
    # And beta, which has no budget, reads that its runs are not capped
    other = console()
    other.sign_in("beta")
    expect(other.page.get_by_role("region", name="Budget").get_by_text("No budget is set")).to_be_visible()


def test_a_trigger_refused_for_the_budget_shows_the_409_message(console, dev) -> None:
    # Given alpha has spent something this month (a run of its job) and its budget is set below that
    client = ApiClient(dev.url, token=TOKENS["alpha"], timeout=30)
    job = client.create_job({"name": "capped", "schedule": "0 0 1 1 *", "target": {"handler": "demo.echo"}})
    client.trigger_job(job["id"])
    wait_for(lambda: client.own_budget()["spent_usd"] > 0, timeout=90, interval=0.5)
    assert client.put_budget("alpha", 0.000001)["state"] == "capped"
    # When alpha opens the job and presses "Trigger now"
    tab = console()
    tab.sign_in("alpha")
    tab.open(f"jobs/{job['id']}")
    tab.page.get_by_role("button", name="Trigger capped now").click()
    # Then the refusal is shown as an alert: the status, the code and the message naming the budget
    alert = tab.page.get_by_role("alert")
    expect(alert).to_contain_text("409 budget_exhausted")
    expect(alert).to_contain_text("monthly budget of")
    expect(alert).to_contain_text("PUT /admin/tenants/alpha/budget")
