"""The console marks a run that missed its deadline (docs/console.md, decision 0058), in Chromium
against a real ``jobsched dev`` that sweeps every 5 s: the run page shows **Deadline** with
**missed**, the Runs list shows **deadline missed** in the row, the job page lists its deadline.

The sweeper reads a run from about its grace after its instant (2 minutes on AWS; 15 s here,
``--sweeper-grace-seconds 15``), so this module waits about that long."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from jobsched.cli.client import ApiClient
from tests.console.conftest import TOKENS, Console, running_dev
from tests.local.devproc import DevProcess

pytestmark = pytest.mark.slow(seconds=40)

expect = pytest.importorskip("playwright.sync_api", reason="playwright is not installed").expect


@pytest.fixture(scope="module")
def dev() -> Iterator[DevProcess]:
    """Given a real ``jobsched dev`` whose sweeper runs every 5 s with a 15 s grace."""
    with running_dev("--sweeper-seconds", "5", "--sweeper-grace-seconds", "15") as process:
        yield process


@pytest.fixture
def alpha(dev: DevProcess) -> ApiClient:
    return ApiClient(dev.url, token=TOKENS["alpha"], timeout=30)


def _missed_run(alpha: ApiClient, job_id: str, timeout: float = 300.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for run in alpha.list_all(alpha.job_runs_path(job_id)):
            if run.get("deadline_missed_at"):
                return run
        time.sleep(2)
    raise AssertionError(f"no run of {job_id} was reported as missing its deadline within {timeout} s")


def test_a_run_that_missed_its_deadline_is_marked_on_its_page_and_in_the_runs_list(
    console: Callable[[], Console], alpha: ApiClient
) -> None:
    # Given a job every 30 s whose runs sleep 6 s against a 2 s deadline, and one of its runs reported
    job = alpha.create_job(
        {
            "name": "console.late",
            "schedule": "*/30 * * * * *",
            "target": {"handler": "demo.sleep"},
            "payload": {"seconds": 6},
            "deadline_seconds": 2,
        }
    )
    run = _missed_run(alpha, job["id"])
    # When the operator opens the run
    tab = console()
    tab.sign_in("alpha")
    tab.open(f"runs/{run['id']}")
    # Then its Deadline row says it was missed
    expect(tab.page.locator("#deadline")).to_contain_text("missed")
    # And the Runs list, filtered by the job, marks its row
    tab.open(f"runs?job_id={job['id']}")
    # (the table shows a shortened id; the link's name is the whole id)
    row = tab.page.get_by_role("row").filter(has=tab.page.get_by_role("link", name=run["id"], exact=True))
    expect(row).to_contain_text("deadline missed")
    # And the job page lists the deadline among its policies
    tab.open(f"jobs/{job['id']}")
    expect(tab.page.get_by_text("a scheduled run not succeeded 2 s after its instant")).to_be_visible()
    assert tab.errors == []
    alpha.pause_job(job["id"])
