"""The console's Workflows pages and the Overview's limits in use, in Chromium against a real
``jobsched dev`` (docs/console.md, "Workflows" and "Overview").

This module's ``jobsched dev`` has deployment default tenant limits (20 runs at once, 100 per second)
so the Overview has limits to show. With ``JOBSCHED_CONSOLE_SCREENSHOTS=<dir>`` the tests save the
pictures of docs/console.md's Workflows and limits sections there.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.console.conftest import running_dev, screenshot_dir
from tests.local.devproc import DevProcess

pytestmark = pytest.mark.slow  # a browser and a jobsched dev: seconds, not milliseconds

expect = pytest.importorskip("playwright.sync_api", reason="playwright is not installed").expect
axe_module = pytest.importorskip(
    "axe_playwright_python.sync_playwright", reason="axe-playwright-python is not installed"
)

TENANT_MAX_RUNNING = 20
TENANT_RUNS_PER_SECOND = 100

#: docs/semantics/workflows.md's example: audit fails its one attempt, so load is upstream_failed
#: and notify (all_done) runs anyway; a retry from failed runs audit again, then load.
ETL = {
    "name": "console etl",
    "schedule": "@yearly",
    "payload": {"day": "2026-12-01"},
    "nodes": [
        {"id": "extract", "target": {"handler": "demo.echo"}, "payload": {"table": "orders"}},
        {"id": "clean", "target": {"handler": "demo.echo"}, "depends_on": ["extract"]},
        {
            "id": "audit",
            "target": {"handler": "demo.flaky"},
            "payload": {"failures": 1},
            "retry": {"max_attempts": 1, "base_seconds": 0, "max_seconds": 0},
            "depends_on": ["extract"],
        },
        {"id": "load", "target": {"handler": "demo.echo"}, "depends_on": ["clean", "audit"]},
        {
            "id": "notify",
            "target": {"handler": "demo.echo"},
            "depends_on": ["load"],
            "trigger_rule": "all_done",
        },
    ],
}


@pytest.fixture(scope="module")
def dev() -> Iterator[DevProcess]:
    """Given a real ``jobsched dev`` with tenants alpha and beta, default tenant limits, no demo jobs."""
    limits = [
        "--tenant-max-running",
        str(TENANT_MAX_RUNNING),
        "--tenant-runs-per-second",
        str(TENANT_RUNS_PER_SECOND),
    ]
    with running_dev(*limits) as process:
        yield process


def _violations(page: Any) -> str:
    results = axe_module.Axe().run(page)
    return "" if results.violations_count == 0 else results.generate_report()


def _shot(page: Any, name: str, **options: Any) -> None:
    shots = screenshot_dir()
    if shots:
        page.screenshot(path=str(shots / f"{name}.png"), **options)


def _workflow_run(client: Any, workflow: dict[str, Any]) -> str:
    return client.request("POST", f"/workflows/{workflow['id']}/runs", body={})["id"]


def _wait_workflow_run(client: Any, run_id: str, state: str, timeout: float = 60.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        run = client.request("GET", f"/workflow-runs/{run_id}")
        if run["state"] == state:
            return run
        assert time.monotonic() < deadline, f"workflow run {run_id} is {run['state']}, not {state}"
        time.sleep(0.2)


def _node(page: Any, node: str) -> Any:
    return page.locator(f'[data-testid="dag"] [data-node="{node}"]')


def test_a_failed_workflow_runs_dag_shows_node_states_and_retries_from_failed(console, api):
    """Given the example ETL workflow whose run failed at audit, when the operator goes Workflows ->
    the workflow -> its run, then the DAG draws each node with its state in words (load
    upstream_failed, notify succeeded), the audit node opens its run's attempt and error, and Retry
    from failed nodes turns the drawing all succeeded without a reload; axe finds no violation on
    the three pages."""
    alpha = api("alpha")
    workflow = alpha.request("POST", "/workflows", body=ETL)
    run_id = _workflow_run(alpha, workflow)
    _wait_workflow_run(alpha, run_id, "failed")
    tab = console()
    tab.sign_in("alpha")
    page = tab.page
    reports = {}

    page.get_by_role("navigation", name="Pages").get_by_role("link", name="Workflows").click()
    expect(tab.heading("Workflows")).to_be_visible()
    row = page.get_by_role("row").filter(has_text=workflow["id"])
    expect(row).to_contain_text("5")  # nodes
    expect(row).to_contain_text("@yearly")
    expect(row.get_by_role("link", name="Last run of console etl: failed")).to_be_visible()
    reports["workflows"] = _violations(page)
    _shot(page, "workflows")

    row.get_by_role("link", name="console etl", exact=True).click()
    expect(tab.heading(re.compile("console etl"))).to_be_visible()
    expect(page.get_by_role("img", name="Node audit")).to_be_visible()  # the definition, no states
    run_link = page.get_by_role("link", name=run_id)
    expect(run_link).to_be_visible()
    reports["workflow"] = _violations(page)
    _shot(page, "workflow", full_page=True)

    run_link.click()
    expect(tab.heading(re.compile(r"^Workflow run .* failed$"))).to_be_visible()
    for node, state in [
        ("extract", "succeeded"),
        ("clean", "succeeded"),
        ("audit", "failed"),
        ("load", "upstream_failed"),
        ("notify", "succeeded"),
    ]:
        expect(_node(page, node)).to_have_attribute("data-state", state)
        expect(_node(page, node)).to_have_accessible_name(f"Node {node}: {state.replace('_', ' ')}")
        expect(_node(page, node)).to_contain_text(state.replace("_", " "))
    expect(page.locator("#node-counts")).to_have_text("3 succeeded, 1 failed, 1 upstream failed")

    page.get_by_role("button", name="Node audit: failed").click()
    panel = page.locator(".node-panel")
    expect(panel.get_by_role("heading", name=re.compile("Node audit"))).to_be_visible()
    expect(panel.get_by_role("link", name=f"{run_id}.naudit")).to_be_visible()
    expect(panel.get_by_role("table")).to_contain_text("demo.flaky: attempt 1 of the 1 planned failures")
    expect(page.get_by_role("button", name="Node audit: failed")).to_have_attribute("aria-pressed", "true")
    assert "node=audit" in page.evaluate("location.hash")
    reports["workflow run"] = _violations(page)
    _shot(page, "workflow-run", full_page=True)

    page.get_by_role("button", name="Retry from failed nodes").click()
    expect(tab.heading(re.compile(r"^Workflow run .* succeeded$"))).to_be_visible(timeout=60_000)
    for node in ("extract", "clean", "audit", "load", "notify"):
        expect(_node(page, node)).to_have_attribute("data-state", "succeeded")
    expect(page.get_by_role("table", name="Retries from failed nodes")).to_contain_text("audit")
    expect(panel.get_by_role("table", name="Attempts of node audit")).to_contain_text("succeeded")
    failing = {name: report for name, report in reports.items() if report}
    assert not failing, "\n\n".join(f"{name}:\n{report}" for name, report in failing.items())
    assert tab.errors == []


def test_cancel_a_running_workflow_run_from_its_dag(console, api):
    """Given a workflow run whose first node sleeps for a minute, when the operator opens the run,
    chooses the sleeping node with the keyboard (Tab, Enter) and presses Cancel workflow run, then
    the run ends cancelled and its pending node is drawn cancelled."""
    alpha = api("alpha")
    workflow = alpha.request(
        "POST",
        "/workflows",
        body={
            "name": "console sleepy",
            "schedule": "@yearly",
            "nodes": [
                {"id": "nap", "target": {"handler": "demo.sleep"}, "payload": {"seconds": 60}},
                {"id": "after", "target": {"handler": "demo.echo"}, "depends_on": ["nap"]},
            ],
        },
    )
    run_id = _workflow_run(alpha, workflow)
    tab = console()
    tab.sign_in("alpha")
    page = tab.page
    tab.open(f"workflow-runs/{run_id}")
    expect(_node(page, "nap")).to_have_attribute("data-state", "running")
    expect(_node(page, "after")).to_have_accessible_name("Node after: pending")
    page.get_by_role("link", name=workflow["id"]).focus()  # the last control before the DAG
    page.keyboard.press("Tab")
    expect(_node(page, "nap")).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator(".node-panel").get_by_role("heading", name=re.compile("Node nap"))).to_be_visible()
    page.get_by_role("button", name="Cancel workflow run").click()
    expect(tab.heading(re.compile(r"^Workflow run .* cancelled$"))).to_be_visible()
    expect(_node(page, "after")).to_have_attribute("data-state", "cancelled")
    assert tab.errors == []


def test_another_tenants_workflow_and_workflow_run_show_not_found(console, api):
    """Given alpha's workflow and a run of it, when beta opens their console URLs, then each says
    not found and nothing of alpha's is shown."""
    alpha = api("alpha")
    workflow = alpha.request(
        "POST",
        "/workflows",
        body={
            "name": "console private flow",
            "schedule": "@yearly",
            "nodes": [{"id": "secret", "target": {"handler": "demo.echo"}}],
        },
    )
    run_id = _workflow_run(alpha, workflow)
    tab = console()
    tab.sign_in("beta")
    tab.open(f"workflow-runs/{run_id}")
    expect(tab.heading("Workflow run not found")).to_be_visible()
    tab.open(f"workflows/{workflow['id']}")
    expect(tab.heading("Workflow not found")).to_be_visible()
    tab.open("workflows")
    expect(tab.heading("Workflows")).to_be_visible()
    expect(tab.page.get_by_text("No workflows yet.")).to_be_visible()
    expect(tab.page.get_by_text("console private flow")).to_have_count(0)


def test_overview_shows_the_limits_in_use(console, api):
    """Given the deployment's default tenant limits and a job limited to one run at a time with one
    run running and one waiting, when the Overview is open, then it shows the tenant's limits with
    their source, the running count of the limit, and the job's key with 1 running and 1 waiting."""
    alpha = api("alpha")
    job = alpha.create_job(
        {
            "name": "console.db-bound",
            "schedule": "@yearly",
            "target": {"handler": "demo.sleep"},
            "payload": {"seconds": 60},
            "timeout_seconds": 120,
            "concurrency": {"key": "console-db", "limit": 1},
        }
    )
    first = alpha.trigger_job(job["id"])["id"]
    deadline = time.monotonic() + 30
    while alpha.get_run(first)["state"] != "running":
        assert time.monotonic() < deadline, "the first run never started"
        time.sleep(0.2)
    second = alpha.trigger_job(job["id"])["id"]
    while alpha.get_run(second).get("waiting_for") != "concurrency:console-db":
        assert time.monotonic() < deadline + 30, "the second run never waited"
        time.sleep(0.2)
    try:
        tab = console()
        tab.sign_in("alpha")
        page = tab.page
        tenant = page.locator("#tenant-limits")
        executing = tenant.get_by_role("row", name=re.compile("Runs executing at once"))
        expect(executing).to_contain_text(f"{TENANT_MAX_RUNNING} (the deployment's default)")
        expect(executing).to_contain_text(re.compile(rf"\b[1-9]\d* of {TENANT_MAX_RUNNING} running"))
        expect(executing.get_by_role("meter")).to_be_visible()
        started = tenant.get_by_role("row", name=re.compile("Runs started per second"))
        expect(started).to_contain_text("100 per second, burst 1 (the deployment's default)")
        expect(started).to_contain_text(f"(at most {TENANT_RUNS_PER_SECOND * 60 + 1} allowed)")
        key_row = page.locator("#key-limits").get_by_role("row").filter(has_text="console-db")
        expect(key_row).to_have_text(re.compile(r"concurrency\s*console-db\s*1 at once\s*1\s*1\s*1"))
        expect(page.get_by_text(re.compile(r"Today \(UTC, GET /usage\)"))).to_be_visible()
        section = page.get_by_role("region", name="Limits in use")
        assert _violations(page) == ""
        shots = screenshot_dir()
        if shots:
            section.screenshot(path=str(shots / "limits.png"))
        assert tab.errors == []
    finally:
        for run in (first, second):
            alpha.cancel_run(run)
