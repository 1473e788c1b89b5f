"""The Overview's "Next hour" panel (decision 0054): the runs due per minute from GET /forecast, as a
chart and as a table a screen reader reads, the calling tenant's only."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

pytest.importorskip("playwright.sync_api", reason="playwright is not installed (requirements-dev.txt)")
from playwright.sync_api import expect


def test_the_overview_shows_the_next_hour_of_the_tenants_runs(console, api):
    """Given alpha's one-off job half an hour from now and beta's job every minute, when alpha opens the
    Overview, then "Next hour" says one run is due and lists it by minute, pool and priority in a
    table; beta's runs are not in it. (The instant comes from the wall clock: an end-to-end test.)"""
    at = (datetime.now(UTC) + timedelta(minutes=30)).strftime("%Y-%m-%dT%H:%M:00")
    api("alpha").create_job(
        {"name": "forecast.once", "schedule": f"at({at})", "target": {"handler": "demo.echo"}}
    )
    api("beta").create_job(
        {"name": "forecast.minutely", "schedule": "* * * * *", "target": {"handler": "demo.echo"}}
    )
    tab = console()
    tab.sign_in("alpha")
    section = tab.page.get_by_role("region", name="Next hour")
    expect(section.get_by_text("1 runs due in the next 60 minutes.")).to_be_visible()
    table = section.get_by_role("table", name="Runs due in the next hour, by minute, pool and priority")
    expect(table.get_by_role("row")).to_have_count(2)  # the header and alpha's one run
    expect(table.get_by_role("cell", name="lambda")).to_be_visible()
    expect(
        section.get_by_role("img", name="Runs due per minute over the next hour", exact=False)
    ).to_be_visible()
