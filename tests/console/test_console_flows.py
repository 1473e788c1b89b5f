"""The console's main flows in Chromium against a real ``jobsched dev`` (docs/console.md).

Each test drives the browser the way an operator would (labels, roles, buttons) and waits for what
the console shows after its own polling (no reload): runs appearing, states changing.
"""

from __future__ import annotations

import re
import time
from typing import Any

import pytest

from tests.console.conftest import TOKENS

pytestmark = pytest.mark.slow(seconds=40)  # a browser and a jobsched dev: seconds, not milliseconds

expect = pytest.importorskip("playwright.sync_api", reason="playwright is not installed").expect

YEARLY = "@yearly"


def _job(
    api: Any, name: str, handler: str, payload: dict[str, Any] | None = None, **extra: Any
) -> dict[str, Any]:
    spec = {
        "name": name,
        "schedule": YEARLY,
        "target": {"handler": handler},
        "payload": payload or {},
        **extra,
    }
    return api("alpha").create_job(spec)


def _wait_run(api: Any, run_id: str, state: str, timeout: float = 30.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run = api("alpha").get_run(run_id)
        if run["state"] == state:
            return run
        time.sleep(0.2)
    raise AssertionError(f"run {run_id} did not reach {state} within {timeout} s: {run['state']}")


def test_sign_in_rejects_a_wrong_token_and_accepts_the_tenants(console):
    """Given the login page, when a wrong token is entered, then the API's refusal is shown and the
    user stays on the login page; when the tenant's token is entered, the Overview opens."""
    tab = console()
    tab.page.goto(tab.url + "/ui")
    tab.page.get_by_label("Tenant token").fill("not-a-token")
    tab.page.get_by_role("button", name="Sign in").click()
    expect(tab.page.get_by_role("alert")).to_contain_text("refused this token")
    tab.sign_in("alpha")
    expect(tab.heading("Overview")).to_be_visible()
    assert tab.page.evaluate("sessionStorage.getItem('jobsched.token')") == "tok-console-alpha"


def test_create_a_job_watch_its_runs_then_pause_and_resume(console):
    """Given a signed-in operator, when they create a job every 5 seconds in the New job dialog, then
    its page shows runs succeeding without a reload; pausing with a note shows the note (page and
    list); resuming with the misfire choice "skip" makes the job active again."""
    tab = console()
    tab.sign_in("alpha")
    page = tab.page
    page.get_by_role("link", name="Jobs", exact=True).click()
    expect(tab.heading("Jobs")).to_be_visible()
    page.get_by_role("button", name="New job").click()
    dialog = page.get_by_role("dialog", name="New job")
    dialog.get_by_label("Name").fill("console.every5s")
    dialog.get_by_label("Handler").fill("demo.echo")
    dialog.get_by_label("Schedule").fill("*/5 * * * * *")
    expect(dialog.get_by_text("Every 5 seconds")).to_be_visible()
    dialog.get_by_role("button", name="Create").click()
    page.get_by_role("status").get_by_role("link", name="console.every5s").click()

    expect(tab.heading(re.compile("console.every5s"))).to_be_visible()
    timeline = page.get_by_role("list", name="Runs, newest scheduled first")
    expect(timeline.get_by_text("succeeded").first).to_be_visible()

    page.get_by_role("button", name="Pause console.every5s").click()
    pause = page.get_by_role("dialog", name="Pause console.every5s")
    pause.get_by_label("Note (shown beside the job)").fill("disk full on the target")
    pause.get_by_role("button", name="Pause").click()
    expect(page.get_by_text("Paused: disk full on the target")).to_be_visible()
    expect(timeline.get_by_text("skipped: paused").first).to_be_visible()

    page.get_by_role("link", name="Jobs", exact=True).click()
    row = page.get_by_role("row").filter(has_text="console.every5s")
    expect(row.get_by_text("Paused: disk full on the target")).to_be_visible()
    row.get_by_role("button", name="Resume console.every5s").click()
    resume = page.get_by_role("dialog", name="Resume console.every5s")
    expect(resume.get_by_text("run none of the missed occurrences, record them skipped")).to_be_visible()
    resume.get_by_label(re.compile("^skip")).check()
    resume.get_by_role("button", name="Resume").click()
    expect(row.get_by_text("active", exact=True)).to_be_visible()
    expect(row.get_by_role("button", name="Pause console.every5s")).to_be_visible()
    assert tab.errors == []


def test_cancel_a_running_run(console, api):
    """Given a job whose run sleeps for a minute, when the operator triggers it from the job page,
    opens the run and presses Cancel run while it is running, then the run shows cancelled."""
    job = _job(api, "console.sleeper", "demo.sleep", {"seconds": 60}, timeout_seconds=120)
    tab = console()
    tab.sign_in("alpha")
    tab.open(f"jobs/{job['id']}")
    page = tab.page
    page.get_by_role("button", name="Trigger console.sleeper now").click()
    page.get_by_role("status").get_by_role("link").click()
    expect(tab.heading(re.compile("^Run"))).to_be_visible()
    expect(tab.heading(re.compile("running"))).to_be_visible()
    page.get_by_role("button", name="Cancel run").click()
    expect(tab.heading(re.compile("cancelled"))).to_be_visible()


def test_the_run_page_shows_what_ran_each_attempt(console, api):
    """Given a run of demo.echo that succeeded, when the operator opens it, then the page names the
    handler and the version the run is bound to, and its attempt the version and the code version of
    the deployment that ran it (decision 0048)."""
    job = _job(api, "console.ranby", "demo.echo", {"hello": "versions"})
    run = _wait_run(api, api("alpha").trigger_job(job["id"])["id"], "succeeded")
    code_version = run["attempts"][0]["code_version"]
    assert code_version  # jobsched dev sets one: the git revision, else "dev"
    tab = console()
    tab.sign_in("alpha")
    tab.open(f"runs/{run['id']}")
    expect(tab.page.locator("#handler")).to_have_text("demo.echo@1")
    attempts = tab.page.get_by_role("table", name="Attempts")
    expect(attempts.get_by_role("columnheader", name="Code version")).to_be_visible()
    row = attempts.get_by_role("row").nth(1)
    expect(row).to_contain_text("demo.echo@1")
    expect(row).to_contain_text(code_version)
    assert tab.errors == []


def test_a_job_created_on_the_long_pool_shows_its_pool_on_the_job_and_run_pages(console, api):
    """Given a signed-in operator, when they create a job in the New job dialog with the pool long and
    a 600 s timeout, then the job page names the pool, and the run page of its run (which ran on the
    long queue's worker) names it too (docs/pools.md)."""
    tab = console()
    tab.sign_in("alpha")
    page = tab.page
    page.get_by_role("link", name="Jobs", exact=True).click()
    page.get_by_role("button", name="New job").click()
    dialog = page.get_by_role("dialog", name="New job")
    dialog.get_by_label("Name").fill("console.longpool")
    dialog.get_by_label("Handler").fill("demo.echo")
    dialog.get_by_label("Schedule").fill(YEARLY)
    dialog.get_by_label("Timeout (seconds)").fill("600")
    dialog.get_by_label("Pool").select_option("long")
    dialog.get_by_role("button", name="Create").click()
    page.get_by_role("status").get_by_role("link", name="console.longpool").click()
    expect(tab.heading(re.compile("console.longpool"))).to_be_visible()
    expect(
        page.locator("dt", has_text=re.compile("^Pool$")).locator("xpath=following-sibling::dd[1]")
    ).to_have_text("long")
    job = next(j for j in api("alpha").list_jobs()["items"] if j["name"] == "console.longpool")
    assert (job["pool"], job["timeout_seconds"]) == ("long", 600)
    run = _wait_run(api, api("alpha").trigger_job(job["id"])["id"], "succeeded")
    tab.open(f"runs/{run['id']}")
    expect(page.locator("#pool")).to_have_text("long")
    assert tab.errors == []


def test_a_run_held_by_a_concurrency_limit_shows_what_it_waits_for(console, api):
    """Given a job limited to one run at a time whose first run sleeps, when a second run is
    triggered and the operator opens it, then its page says it waits for a concurrency slot."""
    job = _job(
        api,
        "console.limited",
        "demo.sleep",
        {"seconds": 60},
        timeout_seconds=120,
        concurrency={"key": "console-one", "limit": 1},
    )
    first = api("alpha").trigger_job(job["id"])
    _wait_run(api, first["id"], "running")
    second = api("alpha").trigger_job(job["id"])
    deadline = time.monotonic() + 30
    while api("alpha").get_run(second["id"]).get("waiting_for") is None:
        assert time.monotonic() < deadline, "the second run never showed waiting_for"
        time.sleep(0.2)
    tab = console()
    tab.sign_in("alpha")
    tab.open(f"runs/{second['id']}")
    expect(tab.page.locator("#waiting")).to_contain_text("a concurrency slot (key console-one's limit")
    for run in (first, second):
        api("alpha").cancel_run(run["id"])


def test_replay_a_dead_letter_with_a_corrected_payload(console, api):
    """Given a run dead-lettered because its payload asked for failures, when the operator replays it
    from the Dead letters page with the payload corrected in the editor, then the replayed run
    succeeds and its replay is recorded with payload_changed."""
    job = _job(api, "console.flaky", "demo.flaky", {"failures": 5}, retry={"max_attempts": 1})
    run_id = api("alpha").trigger_job(job["id"])["id"]
    _wait_run(api, run_id, "failed")
    tab = console()
    tab.sign_in("alpha")
    page = tab.page
    page.get_by_role("link", name="Dead letters").click()
    page.get_by_role("button", name=f"Replay {run_id}").click()
    dialog = page.get_by_role("dialog", name="Replay a dead letter")
    editor = dialog.get_by_label(re.compile("^Payload for the replay"))
    expect(editor).to_have_value(re.compile('"failures": 5'))
    editor.fill("not json")
    dialog.get_by_role("button", name="Replay").click()
    expect(dialog.get_by_role("alert")).to_contain_text("not valid JSON")
    editor.fill('{"failures": 0}')
    dialog.get_by_role("button", name="Replay").click()
    page.get_by_role("status").get_by_role("link", name=f"run {run_id}").click()
    expect(tab.heading(re.compile("succeeded"))).to_be_visible()
    replays = page.get_by_role("table", name="Replays, retries and discards")
    expect(replays.get_by_role("row").nth(1)).to_contain_text("yes")
    assert api("alpha").get_run(run_id)["replays"][-1]["payload_changed"] is True


def test_bulk_replay_confirmation_says_how_many(console, api):
    """Given two dead letters of one job, when the operator filters by the job and asks to replay all
    matching, then the confirmation says 2 and confirming replays both."""
    job = _job(api, "console.bulk", "demo.fail", {"kind": "permanent"})
    run_ids = [
        api("alpha").trigger_job(job["id"], payload={"kind": "permanent", "n": n})["id"] for n in (1, 2)
    ]
    for run_id in run_ids:
        _wait_run(api, run_id, "failed")
    tab = console()
    tab.sign_in("alpha")
    tab.open(f"dead-letters?job_id={job['id']}")
    page = tab.page
    expect(page.get_by_role("button", name=re.compile("^Replay j"))).to_have_count(2)
    page.get_by_role("button", name="Replay all matching…").click()
    dialog = page.get_by_role("dialog", name="Replay all matching")
    expect(dialog).to_contain_text("Replay 2 dead letters")
    expect(dialog).to_contain_text(f"job {job['id']}")
    dialog.get_by_role("button", name="Replay 2").click()
    expect(page.get_by_role("status")).to_contain_text("Replayed 2")


def test_another_tenants_run_and_job_show_not_found(console, api):
    """Given alpha's job and run, when beta opens their console URLs, then each says not found and
    shows nothing of alpha's."""
    job = _job(api, "console.private", "demo.echo", {"secret": "alpha-only"})
    run_id = api("alpha").trigger_job(job["id"])["id"]
    tab = console()
    tab.sign_in("beta")
    tab.open(f"runs/{run_id}")
    expect(tab.heading("Run not found")).to_be_visible()
    tab.open(f"jobs/{job['id']}")
    expect(tab.heading("Job not found")).to_be_visible()
    expect(tab.page.get_by_text("alpha-only")).to_have_count(0)


def test_keyboard_reaches_the_pages_and_dialogs_close_with_escape(console, api):
    """Given a signed-in operator using only the keyboard, when they Tab to the Jobs link and press
    Enter, then the Jobs page opens with focus on its heading; a dialog opened with Enter closes with
    Escape and gives focus back to its button."""
    _job(api, "console.keys", "demo.echo")
    tab = console()
    tab.sign_in("alpha")
    page = tab.page
    for _ in range(10):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.textContent") == "Jobs":
            break
    page.keyboard.press("Enter")
    expect(tab.heading("Jobs")).to_be_focused()
    button = page.get_by_role("button", name="New job")
    button.focus()
    page.keyboard.press("Enter")
    expect(page.get_by_role("dialog", name="New job")).to_be_visible()
    page.keyboard.press("Escape")
    expect(page.get_by_role("dialog", name="New job")).to_be_hidden()
    expect(button).to_be_focused()


def test_a_page_opened_the_moment_the_console_appears_is_the_page_shown(console):
    """Given the login page, when the address changes to the Jobs page in the instant the console first
    shows the Overview after sign-in (before its route listener is attached: a deep link followed as
    the page loads, or a test that opens a page at once), then the Jobs page is shown, not the Overview
    with the Jobs address (seen in a loaded CI run: a job's page opened right after sign-in stayed on
    the Overview)."""
    tab = console()
    page = tab.page
    page.goto(tab.url + "/ui")
    page.get_by_label("Tenant token").fill(TOKENS["alpha"])
    # A MutationObserver's callback runs in the microtask after the render that adds the Overview's
    # heading, before the effects Preact runs after the next frame: the hash changes in between.
    page.evaluate(
        """() => {
          const seen = new MutationObserver(() => {
            const heading = document.querySelector("main h1");
            if (heading && heading.textContent === "Overview") {
              seen.disconnect();
              location.hash = "#/jobs";
            }
          });
          seen.observe(document.body, { childList: true, subtree: true });
        }"""
    )
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(re.compile("#/jobs$"))
    expect(tab.heading("Jobs")).to_be_visible()
    expect(page.get_by_role("link", name="Jobs", exact=True)).to_have_attribute("aria-current", "page")
