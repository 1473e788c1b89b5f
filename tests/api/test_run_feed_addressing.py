"""Feed items live in the Runs table (pk ``feed#<tenant>``) but no run route can address them: a
crafted run or job id naming one answers 404 and changes nothing (docs/decisions/0004)."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from jobsched.core.models import parse_run_id
from tests.api.events import ACME, body_of


@pytest.fixture
def feed_item(aws, call, create_job) -> dict:
    """acme's feed item, after a manual run made through the API recorded it."""
    job = create_job(ACME)
    run = body_of(call("POST", f"/jobs/{job['id']}/trigger", headers=ACME))
    items = aws.clients.dynamodb.query(
        TableName=aws.settings.runs_table,
        KeyConditionExpression="job_id = :p",
        ExpressionAttributeValues={":p": {"S": "feed#acme"}},
    )["Items"]
    job_id, run_key = parse_run_id(run["id"])
    assert [i["runs"]["L"] for i in items] == [[{"S": f"{run_key}#{job_id}"}]]
    return items[0]


def _crafted_ids(item: dict) -> list[str]:
    pk, sk = item["job_id"]["S"], item["run_key"]["S"]
    run_key = item["runs"]["L"][0]["S"].partition("#")[0]
    raw = [f"{pk}.{sk}", f"{pk}.{run_key}", f"feed.{sk}"]
    return raw + [quote(i, safe="") for i in raw]


def test_a_crafted_run_id_cannot_read_cancel_or_retry_a_feed_item(aws, call, feed_item):
    # Given acme's feed item / When its key is used as a run id on every run route
    for run_id in _crafted_ids(feed_item):
        responses = [
            call("GET", f"/runs/{run_id}", headers=ACME),
            call("POST", f"/runs/{run_id}/cancel", headers=ACME),
            call("POST", f"/runs/{run_id}/retry", headers=ACME),
        ]
        # Then each answers 404
        assert [r["statusCode"] for r in responses] == [404, 404, 404], run_id
    # And the feed item is unchanged
    stored = aws.clients.dynamodb.get_item(
        TableName=aws.settings.runs_table,
        Key={"job_id": feed_item["job_id"], "run_key": feed_item["run_key"]},
    )["Item"]
    assert stored == feed_item


@pytest.mark.parametrize("job_id", ["feed#acme", "feed%23acme"])
def test_a_feed_partition_is_not_a_job_whose_runs_can_be_listed(call, feed_item, job_id):
    assert call("GET", f"/jobs/{quote(job_id, safe='')}/runs", headers=ACME)["statusCode"] == 404
    assert call("GET", "/runs", query={"job_id": job_id}, headers=ACME)["statusCode"] == 404
    # while the tenant listing the feed backs shows the run
    assert len(body_of(call("GET", "/runs", headers=ACME))["items"]) == 1
