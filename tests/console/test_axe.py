"""Accessibility: axe-core (through axe-playwright-python) finds no violation on any console page,
the sign-in page and an open dialog included. With ``JOBSCHED_CONSOLE_SCREENSHOTS=<dir>`` the test
also saves a screenshot of each page there (how docs/console.md's pictures are made)."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest

from tests.console.conftest import screenshot_dir

pytestmark = pytest.mark.slow  # a browser and a jobsched dev: seconds, not milliseconds

expect = pytest.importorskip("playwright.sync_api", reason="playwright is not installed").expect
axe_module = pytest.importorskip(
    "axe_playwright_python.sync_playwright", reason="axe-playwright-python is not installed"
)


def _violations(page: Any) -> str:
    results = axe_module.Axe().run(page)
    return "" if results.violations_count == 0 else results.generate_report()


def _world(api: Any) -> dict[str, str]:
    """Given a daily 02:30 job in Europe/Paris (a time the spring change skips) with a run, and a
    dead letter."""
    alpha = api("alpha")
    job = alpha.create_job(
        {
            "name": "axe.report",
            "schedule": "30 2 * * *",
            "timezone": "Europe/Paris",
            "target": {"handler": "demo.echo"},
            "payload": {"report": "daily"},
            "description": "the nightly report",
        }
    )
    failing = alpha.create_job(
        {
            "name": "axe.failing",
            "schedule": "@yearly",
            "target": {"handler": "demo.fail"},
            "payload": {"kind": "permanent"},
        }
    )
    ok = alpha.trigger_job(job["id"])["id"]
    dead = alpha.trigger_job(failing["id"])["id"]
    deadline = time.monotonic() + 30
    while alpha.get_run(dead)["state"] != "failed" or alpha.get_run(ok)["state"] != "succeeded":
        assert time.monotonic() < deadline, "the runs did not finish"
        time.sleep(0.2)
    return {"job": job["id"], "run": ok, "dead": dead}


def test_every_page_has_no_axe_violation(console, api):
    """Given a tenant with jobs, runs and a dead letter, when each page is shown (and a dialog is
    open), then axe-core reports no violation (labels, roles, contrast, landmarks...)."""
    world = _world(api)
    tab = console()
    page = tab.page
    shots = screenshot_dir()
    page.goto(tab.url + "/ui")
    page.get_by_label("Tenant token").wait_for()
    reports = {"login": _violations(page)}
    if shots:
        page.screenshot(path=str(shots / "login.png"))
    tab.sign_in("alpha")
    pages = {
        "overview": ("overview", "Overview"),
        "jobs": ("jobs", "Jobs"),
        "job": (f"jobs/{world['job']}", re.compile("axe.report")),
        "runs": ("runs", "Runs"),
        "run": (f"runs/{world['run']}", re.compile("^Run")),
        "handlers": ("handlers", "Handlers"),
        "dead-letters": ("dead-letters", "Dead letters"),  # last: the replay dialog opens from it
    }
    for name, (fragment, heading) in pages.items():
        tab.open(fragment)
        expect(tab.heading(heading)).to_be_visible()
        expect(page.get_by_text("Loading…")).to_have_count(0)
        page.wait_for_timeout(300)  # the chart draws on the next frame
        reports[name] = _violations(page)
        if shots:
            page.screenshot(path=str(shots / f"{name}.png"), full_page=name != "jobs")
    page.get_by_role("button", name=f"Replay {world['dead']}").click()
    expect(page.get_by_role("dialog", name="Replay a dead letter")).to_be_visible()
    reports["replay dialog"] = _violations(page)
    if shots:
        page.screenshot(path=str(shots / "replay-dialog.png"))
    failing = {name: report for name, report in reports.items() if report}
    assert not failing, "\n\n".join(f"{name}:\n{report}" for name, report in failing.items())
    assert tab.errors == []
