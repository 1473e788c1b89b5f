"""Issue 33 in Chromium against a real ``jobsched dev``: the Overview over a range (GET /stats), what
is in flight by priority, its render time for a week of 10 runs a second, short run ids, and the
replay dialog's JSON check (docs/console.md, "Overview")."""

from __future__ import annotations

import json
import re
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from jobsched.core.run_stats import LAG_BOUNDS
from tests.console.conftest import screenshot_dir

pytestmark = pytest.mark.slow  # a browser and a jobsched dev: seconds, not milliseconds

expect = pytest.importorskip("playwright.sync_api", reason="playwright is not installed").expect
axe_module = pytest.importorskip(
    "axe_playwright_python.sync_playwright", reason="axe-playwright-python is not installed"
)

#: The Overview must draw a week of 10 runs a second (issue 33 §6) within this, in Chromium.
RENDER_BUDGET_MS = 1000


def _violations(page: Any) -> str:
    results = axe_module.Axe().run(page)
    return "" if results.violations_count == 0 else results.generate_report()


def _wait(api: Any, run_id: str, check: Any, timeout: float = 30.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        run = api("alpha").get_run(run_id)
        if check(run):
            return run
        assert time.monotonic() < deadline, f"run {run_id} never got there: {run['state']}"
        time.sleep(0.2)


def test_overview_shows_in_flight_by_priority_and_switches_range(console, api):
    """Given a high-priority run running, when the Overview is open, then the in-flight table counts it
    in the high row; when "Last week" is picked, the URL keeps the range and the numbers table has one
    row per hour of the week (169: the first and the current hour are partial), and axe finds nothing."""
    alpha = api("alpha")
    job = alpha.create_job(
        {
            "name": "tv.high",
            "schedule": "@yearly",
            "priority": "high",
            "target": {"handler": "demo.sleep"},
            "payload": {"seconds": 60},
            "timeout_seconds": 120,
        }
    )
    run_id = alpha.trigger_job(job["id"])["id"]
    _wait(api, run_id, lambda r: r["state"] == "running")
    try:
        tab = console()
        tab.sign_in("alpha")
        page = tab.page
        depth = page.get_by_role("table", name=re.compile("In flight now, by priority"))
        expect(depth.get_by_role("row", name=re.compile("^high"))).to_have_text(
            re.compile(r"high\s*0\s*0\s*1\s*0")
        )
        expect(page.get_by_role("heading", name="Last hour")).to_be_visible()
        shots = screenshot_dir()
        if shots:
            page.wait_for_timeout(300)  # the chart draws on the next frame
            page.screenshot(path=str(shots / "overview.png"), full_page=True)
        page.get_by_role("radio", name="Last week").check()
        expect(page.get_by_role("heading", name="Last week")).to_be_visible()
        assert "range=week" in page.url
        page.get_by_text("The numbers, one row per hour").click()
        # the hours from a week ago to now, both partly: 169 buckets
        expect(page.locator("#activity-table tbody tr")).to_have_count(169)
        expect(
            page.get_by_role("img", name=re.compile("^Ended runs per hour over the last week"))
        ).to_be_visible()
        # usage per UTC day (GET /usage): the last seven days, empty ones included
        usage = page.get_by_role("table", name="Usage per UTC day")
        expect(usage.locator("tbody tr")).to_have_count(7)
        expect(
            page.get_by_role("img", name=re.compile("^Runs started and run-seconds per day"))
        ).to_be_visible()
        assert _violations(page) == ""
        assert tab.errors == []
    finally:
        alpha.cancel_run(run_id)


def _week_of_ten_runs_a_second(now: datetime) -> dict[str, Any]:
    """The GET /stats answer for a week of 10 runs a second in hour buckets (36,000 runs an hour)."""
    start = now.replace(minute=0, second=0, microsecond=0) - timedelta(days=7) + timedelta(hours=1)
    buckets = []
    for h in range(168):
        failed = 40 + h % 7
        bins = [0] * len(LAG_BOUNDS)
        bins[0], bins[1], bins[2], bins[4] = 30000, 4000, 1800, 36000 - 35800 - failed
        buckets.append(
            {
                "start": (start + timedelta(hours=h)).isoformat().replace("+00:00", "Z"),
                "succeeded": 36000 - failed - 20,
                "failed": failed,
                "cancelled": 10,
                "skipped": 10,
                "dead_lettered": 2,
                "dead_letters": 2,
                "lag_count": sum(bins),
                "lag_p50": 0.5,
                "lag_p99": 10.0 if h % 24 else 30.0,
                "lag_bins": bins,
            }
        )
    return {
        "start": buckets[0]["start"],
        "end": (start + timedelta(days=7)).isoformat().replace("+00:00", "Z"),
        "bucket": "hour",
        "lag_bounds": list(LAG_BOUNDS),
        "buckets": buckets,
    }


def test_overview_renders_a_week_of_ten_runs_a_second_within_a_second(console):
    """Given GET /stats answering a week of 10 runs a second (6,048,000 runs in 168 hour buckets), when
    "Last week" is picked, then both charts and the 168-row table are drawn within a second."""
    tab = console()
    tab.sign_in("alpha")
    page = tab.page
    body = json.dumps(_week_of_ten_runs_a_second(datetime.now(UTC)))
    page.route(
        re.compile(r"/stats\?"),
        lambda route: route.fulfill(status=200, content_type="application/json", body=body),
    )
    elapsed = page.evaluate(
        """() => new Promise((resolve, reject) => {
          const t0 = performance.now();
          location.hash = "#/overview?range=week";
          const check = () => {
            const rows = document.querySelectorAll("#activity-table tbody tr").length;
            const activity = 'section[aria-labelledby="activity-h"] .chart canvas';
            const charts = document.querySelectorAll(activity).length;
            if (rows === 168 && charts === 2) return resolve(performance.now() - t0);
            if (performance.now() - t0 > 30000) return reject(new Error(`rows ${rows}, charts ${charts}`));
            requestAnimationFrame(check);
          };
          requestAnimationFrame(check);
        })"""
    )
    print(f"overview week render: {elapsed:.0f} ms")  # the figure docs/console.md quotes
    expect(
        page.get_by_role("table", name=re.compile("Runs due in the last week")).get_by_role("cell").first
    ).to_have_text(f"{sum(36000 - (40 + h % 7) - 20 for h in range(168))}")
    assert elapsed < RENDER_BUDGET_MS, f"the week took {elapsed:.0f} ms to draw"
    shots = screenshot_dir()
    if shots:  # docs/console.md: the week as this test's GET /stats answers it
        expect(page.get_by_role("heading", name="Now")).to_be_visible()
        page.screenshot(path=str(shots / "overview-week.png"), full_page=True)
    assert tab.errors == []


def test_run_ids_are_short_in_tables_and_whole_on_hover_and_in_their_name(console, api):
    alpha = api("alpha")
    job = alpha.create_job(
        {"name": "tv.short-ids", "schedule": "@yearly", "target": {"handler": "demo.echo"}}
    )
    run_id = alpha.trigger_job(job["id"])["id"]
    _wait(api, run_id, lambda r: r["state"] == "succeeded")
    tab = console()
    tab.sign_in("alpha")
    tab.open(f"runs?job_id={job['id']}")
    page = tab.page
    link = page.get_by_role("link", name=run_id, exact=True)
    expect(link).to_be_visible()
    # what is seen: the start, "…", the end (the middle is in the page at font size 0)
    shown = link.locator("code").evaluate(
        "c => [...c.childNodes].filter(n => !n.classList?.contains('elided'))"
        ".map(n => n.textContent).join('')"
    )
    assert shown == run_id[:10] + "…" + run_id[-18:], shown
    assert link.locator(".elided").evaluate("e => getComputedStyle(e).fontSize") == "0px"
    assert link.locator("code").get_attribute("title") == run_id
    expect(page.get_by_role("button", name=f"Copy {run_id}")).to_be_visible()
    assert tab.errors == []


def test_the_replay_dialog_drops_its_json_error_once_the_payload_is_corrected(console, api):
    """Given a dead letter and its replay dialog showing "not valid JSON" after a Replay of a broken
    payload, when the payload is edited (Replay not pressed again), then the message follows the text:
    what is wrong while it is wrong, and gone once it is a JSON object."""
    alpha = api("alpha")
    job = alpha.create_job(
        {
            "name": "tv.dead",
            "schedule": "@yearly",
            "target": {"handler": "demo.fail"},
            "payload": {"kind": "permanent"},
        }
    )
    run_id = alpha.trigger_job(job["id"])["id"]
    _wait(api, run_id, lambda r: r["state"] == "failed")
    tab = console()
    tab.sign_in("alpha")
    page = tab.page
    tab.open("dead-letters")
    page.get_by_role("button", name=f"Replay {run_id}").click()
    dialog = page.get_by_role("dialog", name="Replay a dead letter")
    editor = dialog.get_by_label(re.compile("^Payload for the replay"))
    editor.fill("{not json")
    dialog.get_by_role("button", name="Replay").click()
    expect(dialog.get_by_role("alert")).to_contain_text("not valid JSON")
    editor.fill("[1]")  # still wrong: the message says what is wrong now
    expect(dialog.get_by_role("alert")).to_contain_text("must be a JSON object")
    editor.fill('{"kind": "permanent", "fixed": true}')
    expect(dialog.get_by_role("alert")).to_have_count(0)
    dialog.get_by_role("button", name="Cancel").click()
    assert tab.errors == []


def test_a_workflow_runs_timeline_shows_each_node_waiting_then_running(console, api):
    """Given a finished workflow run a -> b, when its page is open, then the Timeline draws a bar per
    node (b's running bar starts after a's ended) and its table gives each node's wait and run time."""
    alpha = api("alpha")
    workflow = alpha.request(
        "POST",
        "/workflows",
        body={
            "name": "tv timeline",
            "schedule": "@yearly",
            "nodes": [
                {"id": "a", "target": {"handler": "demo.sleep"}, "payload": {"seconds": 1}},
                {"id": "b", "target": {"handler": "demo.echo"}, "depends_on": ["a"]},
            ],
        },
    )
    run_id = alpha.request("POST", f"/workflows/{workflow['id']}/runs", body={})["id"]
    deadline = time.monotonic() + 60
    while (run := alpha.request("GET", f"/workflow-runs/{run_id}"))["state"] != "succeeded":
        assert time.monotonic() < deadline, f"the workflow run never succeeded: {run['state']}"
        time.sleep(0.3)
    nodes = {n["id"]: n for n in run["nodes"]}
    assert nodes["b"]["started_at"] >= nodes["a"]["finished_at"]
    tab = console()
    tab.sign_in("alpha")
    tab.open(f"workflow-runs/{run_id}")
    page = tab.page
    expect(page.get_by_role("heading", name="Timeline")).to_be_visible()
    expect(
        page.get_by_role("img", name=re.compile(f"^Timeline of workflow run {re.escape(run_id)}"))
    ).to_be_visible()
    assert page.locator("svg.gantt rect.gantt-run").count() == 2
    table = page.get_by_role("table", name="Timeline of the nodes")
    expect(table.get_by_role("row", name=re.compile("^a "))).to_contain_text("1")  # attempts
    for node in ("a", "b"):
        expect(table.get_by_role("row", name=re.compile(f"^{node} "))).to_contain_text(
            re.compile(r"\d+(\.\d)? m?s")
        )
    assert _violations(page) == ""
    shots = screenshot_dir()
    if shots:
        page.get_by_role("heading", name="Timeline").scroll_into_view_if_needed()
        page.screenshot(path=str(shots / "workflow-timeline.png"), full_page=True)
    assert tab.errors == []
