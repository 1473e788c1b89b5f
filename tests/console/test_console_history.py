"""Issue 33 §2 in Chromium against a real ``jobsched dev``: a job's history as a grid (GET
/jobs/{id}/history) — cells by what happened, the UTC offset change between them, the upcoming fires,
a cell opening its run, the keyboard, the table, a paused job's resume preview, paging back, axe
(docs/console.md, "Job detail")."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest

from tests.console.conftest import axe_violations, screenshot_dir

pytestmark = pytest.mark.slow(seconds=35)  # a browser and a jobsched dev: seconds, not milliseconds

expect = pytest.importorskip("playwright.sync_api", reason="playwright is not installed").expect


def _until(check: Any, what: str, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (found := check()):
        assert time.monotonic() < deadline, f"{what} did not happen within {timeout} s"
        time.sleep(0.25)
    return found


def _history(api: Any, job_id: str) -> dict[str, Any]:
    return api("alpha").request("GET", f"/jobs/{job_id}/history", query={"limit": 200})


def test_the_grid_of_a_paused_job_shows_what_happened_and_what_a_resume_would_do(console, api):
    """Given a job every 5 s in Europe/Paris, backfilled across the October offset change, with live
    runs and a manual one, paused long enough to miss occurrences: the grid has succeeded and
    withdrawn (paused) cells, the offset change between the October cells, the upcoming fires; the
    arrow keys move through it and Enter opens a run; the resume preview has a row per misfire
    policy; axe finds nothing; after a resume with the skip policy the missed cells say misfire."""
    alpha = api("alpha")
    job = alpha.create_job(
        {
            "name": "grid.ticker",
            "schedule": "*/5 * * * * *",
            "timezone": "Europe/Paris",
            "misfire_grace_seconds": 1,
            "target": {"handler": "demo.echo"},
            "payload": {"grid": True},
        }
    )
    job_id = job["id"]
    window = {"from": "2026-10-25T00:59:40Z", "to": "2026-10-25T01:00:20Z"}
    backfilled = alpha.request("POST", f"/jobs/{job_id}/backfill", body=window)["runs"]
    assert len(backfilled) == 9
    _until(
        lambda: (
            sum(
                c["state"] == "succeeded" and c["trigger"] == "schedule"
                for c in _history(api, job_id)["cells"]
            )
            >= 2
        ),
        "two scheduled runs succeeding",
    )
    manual = alpha.trigger_job(job_id)["id"]
    _until(lambda: alpha.get_run(manual)["state"] == "succeeded", "the manual run")
    withdrawn = alpha.pause_job(job_id)["withdrawn_runs"]
    assert withdrawn  # the runs queued ahead (the 60 s look-ahead)
    # wait until at least two withdrawn occurrences are more than the grace (1 s) in the past
    _until(
        lambda: sum(c["skip_reason"] == "paused" for c in _history(api, job_id)["cells"]) >= 2,
        "withdrawn occurrences falling due",
    )
    time.sleep(2)

    tab = console()
    tab.sign_in("alpha")
    tab.open(f"jobs/{job_id}")
    page = tab.page
    expect(tab.heading(re.compile("grid.ticker"))).to_be_visible()
    grid = page.get_by_role("list", name=re.compile("^History of the job"))
    expect(grid.locator("a[aria-label$=': succeeded']").first).to_be_visible()
    expect(grid.locator("a[aria-label*='skipped: paused']").first).to_be_visible()
    expect(grid.locator("a[aria-label*='(manual)']")).to_have_count(1)
    expect(grid.locator("a[aria-label*='(backfill)']")).to_have_count(9)
    # the October change (UTC+02:00 to UTC+01:00 at 01:00 UTC) sits between the backfilled cells
    change = grid.locator("li.grid-change").first
    words = re.compile(r"UTC offset change at .*: UTC\+02:00 to UTC\+01:00")
    expect(change).to_have_attribute("title", words)
    labels = grid.locator("li").evaluate_all(
        "items => items.map(li => li.classList.contains('grid-change') ? '|'"
        " : li.firstElementChild.getAttribute('aria-label'))"
    )
    assert labels.index("|") == 4, labels  # 00:59:40, :45, :50, :55 before; 01:00:00 after
    expect(grid.locator("[aria-label*=': upcoming']")).to_have_count(10)
    # the resume preview: one row per misfire policy, the job's own marked
    preview = page.locator("#resume-table tbody tr")
    expect(preview).to_have_count(3)
    expect(preview.nth(0)).to_contain_text("run_once (the job's)")
    expect(preview.nth(2).locator("td").nth(0)).to_have_text("0")  # skip queues no run
    expect(preview.nth(1).locator("td").nth(0)).not_to_have_text("0")  # run_all queues them all
    # the table holds the same records, the change as a row; axe finds nothing on the page
    page.get_by_text("The history as a table").click()
    table = page.locator("#history-table")
    expect(table.locator("tr.change-row")).to_have_count(1)
    expect(table.locator("tr.change-row")).to_contain_text("UTC+02:00 → UTC+01:00")
    report = axe_violations(page)
    assert not report, report
    shots = screenshot_dir()
    if shots:
        page.locator("section[aria-labelledby='history-h']").screenshot(path=str(shots / "job-history.png"))
    # the keyboard: one Tab stop; End goes to the last upcoming fire, Home to the first cell, Enter opens it
    grid.locator("[data-cell][tabindex='0']").focus()
    page.keyboard.press("End")
    focused = page.evaluate("document.activeElement.getAttribute('aria-label')")
    assert focused.endswith(": upcoming") or "upcoming (" in focused, focused
    page.keyboard.press("Home")
    page.keyboard.press("ArrowRight")
    focused = page.evaluate("document.activeElement.getAttribute('aria-label')")
    assert "(backfill)" in focused, focused
    page.keyboard.press("Enter")  # the focus is on the second backfilled cell
    expect(tab.heading(re.compile("^Run"))).to_be_visible()
    assert backfilled[1]["id"] in page.url

    # When the job is resumed from its page with the skip policy, its dialog having said what each
    # choice would do now, the occurrences it missed are recorded misfire
    tab.open(f"jobs/{job_id}")
    page.get_by_role("button", name="Resume grid.ticker").click()
    dialog = page.get_by_role("dialog", name="Resume grid.ticker")
    skip_choice = dialog.locator("label.choice", has_text=re.compile(r"^\s*skip:"))
    expect(skip_choice).to_contain_text(re.compile(r"If resumed now: \d+ runs? queued, \d+ recorded skipped"))
    expect(dialog.locator("label.choice").first).to_contain_text("If resumed now:")  # the job's own
    report = axe_violations(page)
    assert not report, report
    skip_choice.get_by_role("radio").check()
    dialog.get_by_role("button", name="Resume").click()
    expect(dialog).to_be_hidden()
    expect(grid.locator("a[aria-label*='skipped: misfire']").first).to_be_visible()
    expect(page.locator("#resume-table")).to_have_count(0)  # active again: no preview
    assert alpha.get_job(job_id)["state"] == "active"
    alpha.pause_job(job_id)  # stop it: the module's jobsched dev runs other tests next
    assert tab.errors == []


def test_older_pages_of_a_long_history(console, api):
    """Given a yearly job with 121 backfilled records (1906 to 2026), the grid shows the newest 100
    (1927 on); Older shows the 21 before them and ends the history; Newest comes back."""
    alpha = api("alpha")
    job = alpha.create_job({"name": "grid.long", "schedule": "0 0 1 1 *", "target": {"handler": "demo.echo"}})
    window = {"from": "1906-01-01T00:00:00Z", "to": "2026-01-01T00:00:00Z"}
    alpha.request("POST", f"/jobs/{job['id']}/backfill", body=window)  # 121: made in the background
    _until(lambda: len(_history(api, job["id"])["cells"]) == 121, "the backfill's 121 records")
    tab = console()
    tab.sign_in("alpha")
    tab.open(f"jobs/{job['id']}")
    page = tab.page
    grid = page.get_by_role("list", name=re.compile("^History of the job"))
    cells = grid.locator("a.grid-cell")
    expect(cells).to_have_count(100)
    expect(cells.first).to_have_attribute("href", re.compile(r"\.19270101T000000"))
    expect(cells.first).to_have_attribute("aria-label", re.compile("1927"))
    page.get_by_role("button", name="Older").click()
    expect(cells).to_have_count(21)
    expect(cells.first).to_have_attribute("href", re.compile(r"\.19060101T000000"))
    expect(page.get_by_role("button", name="Older")).to_be_disabled()
    page.get_by_role("button", name="Newest").click()
    expect(cells).to_have_count(100)
    assert tab.errors == []
