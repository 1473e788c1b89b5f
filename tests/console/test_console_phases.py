"""Issue 33 §1 and §3 in Chromium against a real ``jobsched dev`` (decision 0064): the Overview's queue
depth over the range for an administrator (and a note for a tenant), its dead letters per bucket, and
a workflow run's timeline drawn as its node runs' phases (docs/console.md)."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from jobsched.core.run_stats import LAG_BOUNDS
from tests.console.conftest import running_dev, screenshot_dir
from tests.local.devproc import DevProcess

pytestmark = pytest.mark.slow(seconds=40)  # a browser and a jobsched dev: seconds, not milliseconds

expect = pytest.importorskip("playwright.sync_api", reason="playwright is not installed").expect
axe_module = pytest.importorskip(
    "axe_playwright_python.sync_playwright", reason="axe-playwright-python is not installed"
)

#: jobsched dev sweeps every 5 s here (``--sweeper-seconds 5``; 60 by default): the first depth sample
#: is there within this (a busy machine).
FIRST_SAMPLE_MS = 60_000


@pytest.fixture(scope="module")
def dev() -> Iterator[DevProcess]:
    """Given ``jobsched dev`` with tenants alpha (an administrator) and beta, sweeping every 5 s."""
    with running_dev("--admin", "alpha", "--sweeper-seconds", "5") as process:
        yield process


def _violations(page: Any) -> str:
    results = axe_module.Axe().run(page)
    return "" if results.violations_count == 0 else results.generate_report()


def test_an_administrator_sees_each_queues_depth_over_the_range(console):
    """Given the sweeper sampling the run queues, when the administrator opens the Overview, then a
    "Queue depth" chart is drawn and its table has one row per minute of the hour (61: both ends
    partial), five queues of three figures each, and a sampled minute with numbers in it; axe finds
    nothing."""
    tab = console()
    tab.sign_in("alpha")
    page = tab.page
    expect(page.get_by_role("heading", name="Queue depth over time")).to_be_visible()
    expect(
        page.get_by_role("img", name=re.compile("^Messages ready per run queue per minute"))
    ).to_be_visible()
    page.get_by_text("The numbers, one row per minute").last.click()
    table = page.locator("#depth-table")
    expect(table.locator("tbody tr")).to_have_count(61)  # both ends partial minutes
    expect(table.locator("thead th[scope=colgroup]")).to_have_text(
        ["high", "default", "low", "long", "container"]
    )
    # a sweep has sampled a minute: its cells hold numbers (every queue is empty: 0), not "—"
    sampled = table.locator("tbody tr").filter(has=page.locator("td", has_text=re.compile(r"^\d+$")))
    expect(sampled.first).to_be_visible(timeout=FIRST_SAMPLE_MS)
    expect(sampled.first.locator("td")).to_have_text(["0"] * 15)
    shots = screenshot_dir()
    if shots:
        page.wait_for_timeout(300)  # the chart draws on the next frame
        page.get_by_role("heading", name="Queue depth over time").scroll_into_view_if_needed()
        page.screenshot(path=str(shots / "overview-depth.png"), full_page=True)
    assert _violations(page) == ""
    assert tab.errors == []


def _hour_with_dead_letters(now: datetime) -> dict[str, Any]:
    """A GET /stats answer for the last hour: a minute 10 minutes ago with 3 runs dead-lettered."""
    start = now.replace(second=0, microsecond=0) - timedelta(minutes=59)
    buckets = []
    for m in range(60):
        dead = 3 if m == 49 else 0
        buckets.append(
            {
                "start": (start + timedelta(minutes=m)).isoformat().replace("+00:00", "Z"),
                "succeeded": 5,
                "failed": dead,
                "cancelled": 0,
                "skipped": 0,
                "dead_lettered": dead,
                "dead_letters": dead,
                "lag_count": 5,
                "lag_p50": 0.5,
                "lag_p99": 1.0,
                "lag_bins": [4, 1] + [0] * (len(LAG_BOUNDS) - 2),
            }
        )
    return {
        "start": buckets[0]["start"],
        "end": (start + timedelta(hours=1)).isoformat().replace("+00:00", "Z"),
        "bucket": "minute",
        "lag_bounds": list(LAG_BOUNDS),
        "buckets": buckets,
    }


def test_a_tenant_sees_its_dead_letters_per_bucket_and_no_queue_depth(console):
    """Given a tenant who is not an administrator and GET /stats with 3 dead letters in one minute,
    when the Overview is open, then the dead-letter chart is drawn and its minute's row says 3;
    the queue depth section says who sees it (one refused request, not one per refresh); axe finds
    nothing."""
    tab = console()
    page = tab.page
    depth_requests: list[str] = []
    page.on("request", lambda r: depth_requests.append(r.url) if "/stats/queues" in r.url else None)
    body = json.dumps(_hour_with_dead_letters(datetime.now(UTC)))
    page.route(
        re.compile(r"/stats\?"),
        lambda route: route.fulfill(status=200, content_type="application/json", body=body),
    )
    tab.sign_in("beta")
    expect(
        page.get_by_role("img", name=re.compile("^Runs that went to the dead letters per minute"))
    ).to_be_visible()
    page.get_by_text("The numbers, one row per minute").click()
    rows = page.locator("#activity-table tbody tr")
    expect(rows).to_have_count(60)
    expect(rows.nth(49).locator("td").last).to_have_text("3")
    expect(page.get_by_text("3 in the last hour")).to_be_visible()
    expect(page.get_by_text("their depth is shown to administrators")).to_be_visible()
    expect(page.locator("#depth-table")).to_have_count(0)
    page.wait_for_timeout(6000)  # longer than the hour's refresh period (5 s)
    assert len(depth_requests) == 1, depth_requests
    assert _violations(page) == ""
    assert tab.errors == []


def _wait_succeeded(alpha: Any, run_id: str, timeout: float = 120.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while (run := alpha.request("GET", f"/workflow-runs/{run_id}"))["state"] != "succeeded":
        assert run["state"] in ("queued", "running"), run
        assert time.monotonic() < deadline, f"the workflow run never succeeded: {run['state']}"
        time.sleep(0.5)
    return run


def test_a_workflow_runs_timeline_draws_each_nodes_phases(console, api):
    """Given tenant beta limited to one run at a time, and a workflow whose two roots sleep 2 s each
    and whose last node fails once before it succeeds, when the run has succeeded and its page is open,
    then one root waited for the limit, the last node retried, and the Timeline draws a bar per phase
    with the table's totals per phase; axe finds nothing."""
    admin, beta = api("alpha"), api("beta")
    admin.request("PUT", "/admin/tenants/beta/limits", body={"max_running": 1})
    try:
        _timeline_with_phases(console, beta)
    finally:
        admin.request("DELETE", "/admin/tenants/beta/limits")


def _timeline_with_phases(console: Any, beta: Any) -> None:
    workflow = beta.request(
        "POST",
        "/workflows",
        body={
            "name": "phases",
            "schedule": "@yearly",
            "nodes": [
                {"id": "left", "target": {"handler": "demo.sleep"}, "payload": {"seconds": 2}},
                {"id": "right", "target": {"handler": "demo.sleep"}, "payload": {"seconds": 2}},
                {
                    "id": "last",
                    "target": {"handler": "demo.flaky"},
                    "payload": {"failures": 1},
                    "depends_on": ["left", "right"],
                    "retry": {"max_attempts": 3, "base_seconds": 1, "max_seconds": 2},
                },
            ],
        },
    )
    run_id = beta.request("POST", f"/workflows/{workflow['id']}/runs", body={})["id"]
    run = _wait_succeeded(beta, run_id)
    phases = {n["id"]: [p["phase"] for p in n["phases"]] for n in run["nodes"]}
    assert "waiting" in phases["left"] + phases["right"], phases  # one root held by the limit of 1
    assert phases["last"][-3:] == ["running", "retrying", "running"], phases
    every = [p for ps in phases.values() for p in ps]
    tab = console()
    tab.sign_in("beta")
    tab.open(f"workflow-runs/{run_id}")
    page = tab.page
    expect(
        page.get_by_role("img", name=re.compile(f"^Timeline of workflow run {re.escape(run_id)}"))
    ).to_be_visible()
    gantt = page.locator("svg.gantt")
    expect(gantt.locator("rect.gantt-run")).to_have_count(4)  # an attempt each, two for "last"
    for phase in ("queued", "waiting", "retrying"):  # a bar per phase the API answered
        expect(gantt.locator(f"rect.gantt-{phase}")).to_have_count(every.count(phase))
    table = page.get_by_role("table", name="Timeline of the nodes")
    header = [t.strip() for t in table.locator("thead th").all_inner_texts()]
    assert header[4:8] == ["queued", "waiting for a limit", "running", "retrying (backoff)"], header
    last = table.get_by_role("row", name=re.compile("^last "))
    expect(last.locator("td").nth(6)).to_have_text(re.compile(r"^\d+(\.\d)? m?s$"))  # retrying
    expect(last.locator("td").last).to_have_text("2")  # attempts
    waited = [
        table.get_by_role("row", name=re.compile(f"^{n} ")).locator("td").nth(4).inner_text()
        for n in ("left", "right")
    ]
    assert [w != "—" for w in waited] == ["waiting" in phases[n] for n in ("left", "right")], waited
    shots = screenshot_dir()
    if shots:
        page.get_by_role("heading", name="Timeline").scroll_into_view_if_needed()
        page.screenshot(path=str(shots / "workflow-phases.png"), full_page=True)
    assert _violations(page) == ""
    assert tab.errors == []
