"""The Overview's usage table in Chromium (decision 0059 amended): each UTC day's Step Functions
transitions, SNS publishes and Fargate vCPU-seconds beside the runs and the estimate, as GET /usage
answers them."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta

import pytest

from tests.console.conftest import axe_violations

pytestmark = pytest.mark.slow  # a browser and a jobsched dev: seconds, not milliseconds

expect = pytest.importorskip("playwright.sync_api", reason="playwright is not installed").expect


def _usage_answer(today: datetime) -> dict:
    first = (today - timedelta(days=6)).date().isoformat()
    day = today.date().isoformat()
    item = {
        "tenant": "alpha",
        "day": day,
        "runs_started": 4,
        "runs_succeeded": 4,
        "runs_failed": 0,
        "runs_cancelled": 0,
        "runs_dead_lettered": 0,
        "run_seconds": 12.5,
        "throttled_waits": 0,
        "wru": 20.0,
        "rru": 4.0,
        "sqs_requests": 9.0,
        "lambda_gb_seconds": 3.2,
        "lambda_requests": 2.5,
        "sfn_transitions": 7.0,
        "sns_publishes": 2.0,
        "fargate_vcpu_seconds": 37.5,
        "fargate_gb_seconds": 75.0,
        "estimated_usd": 0.000567,
    }
    return {"items": [item], "first_day": first, "last_day": day, "next_cursor": None}


def test_the_usage_table_shows_transitions_publishes_and_fargate_seconds_per_day(console):
    """Given GET /usage answering today's transitions, publishes and Fargate seconds, when the Overview
    is open, then today's row shows them in their own columns, and axe finds nothing."""
    tab = console()
    page = tab.page
    body = json.dumps(_usage_answer(datetime.now(UTC)))
    page.route(
        re.compile(r"/usage\?"),
        lambda route: route.fulfill(status=200, content_type="application/json", body=body),
    )
    tab.sign_in("alpha")
    table = page.get_by_role("table", name="Usage per UTC day")
    for header in ("state transitions", "SNS publishes", "Fargate vCPU-seconds", "estimated cost (USD)"):
        expect(table.get_by_role("columnheader", name=header)).to_be_visible()
    today = datetime.now(UTC).date().isoformat()
    row = table.get_by_role("row", name=re.compile(today))
    expect(row).to_have_text(re.compile(r"4\s*12\.5\s*7\s*2\s*37\.5\s*0\.000567"))
    expect(table.locator("tbody tr")).to_have_count(7)
    assert axe_violations(page) == ""
    assert tab.errors == []
