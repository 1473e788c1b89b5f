"""The console's Handlers page and the New job form's versions (issue 29 §5), in Chromium against a
real ``jobsched dev`` whose tenant alpha is also an administrator and which loads ``console.report``
versions 1 and 2 (tests/console/versioned_handlers.py)."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from tests.console.conftest import running_dev
from tests.local.devproc import DevProcess

expect = pytest.importorskip("playwright.sync_api", reason="playwright is not installed").expect


@pytest.fixture(scope="module")
def dev() -> Iterator[DevProcess]:
    """Given ``jobsched dev`` with tenants alpha (an administrator) and beta, and console.report v1, v2."""
    with running_dev(
        "--admin", "alpha", env={"JOBSCHED_HANDLER_MODULES": "tests.console.versioned_handlers"}
    ) as process:
        yield process


def test_new_job_shows_the_versions_and_the_payload_fields_and_pins_one(console, api):
    """Given the New job dialog, when the operator names console.report, then the newest version's
    payload fields are listed and a pin select offers both versions; pinning v1 creates a pinned job."""
    tab = console()
    tab.sign_in("beta")
    page = tab.page
    page.get_by_role("link", name="Jobs", exact=True).click()
    page.get_by_role("button", name="New job").click()
    dialog = page.get_by_role("dialog", name="New job")
    dialog.get_by_label("Name").fill("console.pinned")
    dialog.get_by_label("Handler").fill("console.report")
    version = dialog.get_by_label("Version")
    expect(version.get_by_role("option", name="newest (v2)")).to_be_attached()
    fields = dialog.get_by_role("table", name="Payload fields")
    expect(fields.get_by_role("row").filter(has_text="rows")).to_contain_text("yes")
    version.select_option(label="pin v1")
    expect(dialog.get_by_text("This version declares no payload schema")).to_be_visible()
    dialog.get_by_label("Schedule").fill("@daily")
    dialog.get_by_role("button", name="Create").click()
    created = page.get_by_role("status").get_by_role("link", name="console.pinned")
    expect(created).to_be_visible()
    [job] = [j for j in api("beta").list_jobs()["items"] if j["name"] == "console.pinned"]
    assert (job["target"], job["payload_version"]) == ({"handler": "console.report", "version": 1}, 1)
    assert tab.errors == []


def test_handlers_page_lists_versions_and_an_administrator_drains_one(console, api):
    """Given a job pinned to console.report v1, when the administrator opens Handlers, then each version
    is listed with its counts; Drain marks v1 draining and Undrain makes it active again."""
    api("alpha").create_job(
        {"name": "pinned v1", "schedule": "@daily", "target": {"handler": "console.report", "version": 1}}
    )
    tab = console()
    tab.sign_in("alpha")
    page = tab.page
    page.get_by_role("link", name="Handlers", exact=True).click()
    expect(tab.heading("Handlers")).to_be_visible()
    table = page.get_by_role("table", name="Handler versions")
    v1 = (
        table.get_by_role("row")
        .filter(has=page.get_by_role("rowheader", name=re.compile("console.report")))
        .filter(has_text="the old report")
    )
    expect(v1.get_by_text("active", exact=True)).to_be_visible()
    expect(page.get_by_text("every tenant")).to_be_visible()
    v1.get_by_role("button", name="Drain console.report v1").click()
    expect(v1.get_by_text("draining", exact=True)).to_be_visible()
    assert [
        (v["version"], v["status"], v["jobs"])
        for v in api("alpha").list_handlers()["handlers"]
        if v["name"] == "console.report"
    ] == [(1, "draining", 1), (2, "active", 0)]
    v1.get_by_role("button", name="Undrain console.report v1").click()
    expect(v1.get_by_text("active", exact=True)).to_be_visible()
    assert tab.errors == []


def test_a_tenant_sees_its_own_counts_without_drain_buttons(console):
    tab = console()
    tab.sign_in("beta")
    tab.open("handlers")
    expect(tab.heading("Handlers")).to_be_visible()
    expect(tab.page.get_by_text("this tenant")).to_be_visible()
    expect(tab.page.get_by_role("button", name=re.compile("^(Drain|Undrain) "))).to_have_count(0)
    assert tab.errors == []
