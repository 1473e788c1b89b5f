"""Listing at scale (issue 12 §4): active states through the in-flight ledger, failed runs through the
dead-letter index (decision 0021), pages that end, a job's history apart from its upcoming runs. The
in-memory fakes and a fixed clock; the three tests of the read units reach them as a DynamoDB client
(marked ``units``), so the metering adapter estimates the units as over moto (decision 0035)."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta

import pytest

from jobsched.core.models import RunState, Trigger
from jobsched.core.run_records import new_run
from tests.api.conftest import JOB
from tests.api.events import ACME, GLOBEX, body_of
from tests.aws.conftest import T0

HISTORY = 300


@pytest.fixture
def app(aws, clock):
    """The API over ``aws``, its services kept at hand (``app.services``) for the meter and the store."""
    from jobsched.api.app import build_app
    from jobsched.api.auth import AuthConfig, Authenticator
    from jobsched.compose.api import build_services
    from tests.api.conftest import ADMIN_ROLE
    from tests.api.events import TOKENS

    environ = {"JOBSCHED_AUTH_MODE": "token", "JOBSCHED_TENANT_TOKENS": json.dumps(TOKENS)}
    environ["JOBSCHED_ADMIN_PRINCIPALS"] = "token:ops," + ADMIN_ROLE
    services = build_services(aws.settings, aws.clients, clock)
    built = build_app(services, Authenticator(AuthConfig.from_env(environ), services.principals))
    built.services = services  # type: ignore[attr-defined]
    return built


@pytest.fixture
def history(app, clock):
    """A job of acme with HISTORY succeeded runs, three queued (backfilled) and one failed run."""
    services = app.services
    job = services.jobs.create("acme", JOB, T0)  # next fire 03:00: nothing queued ahead
    store = services.runs.runs
    done = []
    for i in range(HISTORY):
        run = new_run(job, T0 - timedelta(minutes=HISTORY - i), Trigger.SCHEDULE, T0)
        done.append(replace(run, state=RunState.SUCCEEDED, finished_at=T0))
    store.announce(done)
    for run in done:
        store.put_announced(run)
    queued = [
        new_run(job, T0 - timedelta(minutes=m), Trigger.BACKFILL, T0, nonce=f"n{m}") for m in (290, 150, 10)
    ]
    for run in queued:
        store.create(run)
    failed = replace(
        new_run(job, T0 - timedelta(minutes=200), Trigger.BACKFILL, T0, nonce="f"),
        state=RunState.FAILED,
        dead_lettered_at=T0,
        error="boom",
    )
    store.create(failed)
    return {"job": job, "queued": queued, "failed": failed, "meter": store.dynamo.meter}


def _list(call, **query):
    response = call("GET", "/runs", query={k: str(v) for k, v in query.items()}, headers=ACME)
    assert response["statusCode"] == 200, response
    return body_of(response)


@pytest.mark.units  # asserts read units: the metering adapter over the fakes' DynamoDB client
def test_listing_queued_runs_reads_what_it_returns_not_the_history(call, history):
    # Given a job with 300 succeeded runs and 3 queued ones spread over its history
    meter = history["meter"]
    meter.reset()
    # When the tenant's queued runs are listed, then one job's
    tenant_wide = _list(call, state="queued")
    tenant_reads = meter.snapshot()["dynamodb"]["rcu"]
    meter.reset()
    of_job = _list(call, state="queued", job_id=history["job"].id)
    # Then both pages hold exactly the three queued runs, newest scheduled first, and end the list
    expected = [r.id for r in sorted(history["queued"], key=lambda r: r.run_key, reverse=True)]
    assert [r["id"] for r in tenant_wide["items"]] == expected
    assert [r["id"] for r in of_job["items"]] == expected
    assert tenant_wide["next_cursor"] is None and of_job["next_cursor"] is None
    # And each listing read a few units (the ledger items and the runs in flight), where filtering
    # the history would read at least half a unit per run examined (150 units for 300 runs)
    assert tenant_reads <= 5
    assert meter.snapshot()["dynamodb"]["rcu"] <= 5


def test_a_filtered_page_holding_the_last_match_ends_the_list(call, history):
    # Given one failed run among 300 succeeded and 3 queued ones
    # When failed runs are listed one per page
    page = _list(call, state="failed", limit=1)
    # Then the single page holds it and there is no cursor to an empty page
    assert [r["id"] for r in page["items"]] == [history["failed"].id]
    assert page["next_cursor"] is None


def test_pages_of_queued_runs_follow_each_other_without_gaps(call, history):
    # Given three queued runs / When they are listed two per page
    first = _list(call, state="queued", limit=2)
    second = _list(call, state="queued", limit=2, cursor=first["next_cursor"])
    # Then the two pages hold the three runs once each, and the second ends the list
    ids = [r["id"] for r in first["items"] + second["items"]]
    assert sorted(ids) == sorted(r.id for r in history["queued"]) and len(ids) == 3
    assert first["next_cursor"] is not None and second["next_cursor"] is None


def test_another_tenant_lists_none_of_them(call, history):
    # Given acme's queued runs / When globex lists its queued runs / Then it sees none
    response = call("GET", "/runs", query={"state": "queued"}, headers=GLOBEX)
    assert body_of(response) == {"items": [], "next_cursor": None}


def test_a_run_that_finished_leaves_the_queued_list(call, history, aws, clock):
    # Given a queued run that is then cancelled
    run = history["queued"][0]
    assert call("POST", f"/runs/{run.id}/cancel", headers=ACME)["statusCode"] == 200
    # When queued runs are listed / Then it is no longer among them
    ids = [r["id"] for r in _list(call, state="queued")["items"]]
    assert run.id not in ids and len(ids) == 2


def test_a_jobs_runs_show_history_first_and_upcoming_apart(call, create_job, clock):
    # Given a per-second job: its runs of the next minute are queued ahead at creation
    job = create_job(ACME, schedule="* * * * * *")
    clock.advance(seconds=5)
    # When its runs are read, then its upcoming runs
    history = body_of(call("GET", f"/jobs/{job['id']}/runs", headers=ACME))["items"]
    upcoming = body_of(call("GET", f"/jobs/{job['id']}/runs", query={"upcoming": "true"}, headers=ACME))
    # Then the history holds only runs scheduled up to now, newest first
    now = clock.now().isoformat().replace("+00:00", "")
    assert history and all(r["scheduled_at"] <= now + "Z" for r in history)
    assert [r["scheduled_at"] for r in history] == sorted((r["scheduled_at"] for r in history), reverse=True)
    # And the upcoming list the runs after now, soonest first
    later = [r["scheduled_at"] for r in upcoming["items"]]
    assert later and all(s > now for s in later) and later == sorted(later)


def _sweeper(app):
    from jobsched.services.sweeper import Sweeper, SweeperConfig

    services = app.services
    store = services.runs.runs
    return Sweeper(
        config=SweeperConfig(runs_table=store.table),
        dynamo=store.dynamo,
        jobs=services.runs.jobs,
        attempts=services.runs.attempts,
        queues=services.runs.queues,
    )


@pytest.fixture
def backfilled(app, clock):
    """A job of acme whose 200 backfilled runs (one announce: one ledger item) all succeeded but 4."""
    services = app.services
    job = services.jobs.create("acme", JOB, T0)
    store = services.runs.runs
    runs = [  # due at once, as JobService.backfill_now makes them
        replace(new_run(job, T0 - timedelta(minutes=300 - i), Trigger.BACKFILL, T0, nonce=f"b{i}"), due_at=T0)
        for i in range(200)
    ]
    store.announce(runs)
    for run in runs:
        store.put_announced(run)
    waiting = runs[::50]
    for run in runs:
        if run not in waiting:
            store.transition(store.transition(run, RunState.RUNNING, T0), RunState.SUCCEEDED, T0)
    return {"job": job, "waiting": waiting, "meter": store.dynamo.meter}


@pytest.mark.units  # asserts read units: the metering adapter over the fakes' DynamoDB client
def test_a_sweep_compacts_a_big_ledger_item_so_listing_reads_the_runs_in_flight(app, call, backfilled, clock):
    # Given 200 backfilled runs named by one ledger item, 196 of which succeeded
    meter = backfilled["meter"]
    meter.reset()
    before = _list(call, state="queued", job_id=backfilled["job"].id)
    read_before = meter.snapshot()["dynamodb"]["rcu"]
    # When the sweeper runs past its grace period
    clock.advance(minutes=3)
    summary = _sweeper(app).sweep(clock.now())
    meter.reset()
    after = _list(call, state="queued", job_id=backfilled["job"].id)
    read_after = meter.snapshot()["dynamodb"]["rcu"]
    # Then the item was rewritten with the 4 runs still queued, and the same listing, which read every
    # run the big item named before (by Query, billed by size: under a quarter of 0.5 RRU each, the
    # by-key price; decision 0035), now reads about the 4 runs
    expected = sorted(r.id for r in backfilled["waiting"])
    assert sorted(r["id"] for r in before["items"]) == expected == sorted(r["id"] for r in after["items"])
    assert summary.compacted == 1
    assert read_after <= 5 < read_before < 200 * 0.5 / 4, (read_before, read_after)


def test_a_run_that_ended_after_the_compaction_still_leaves_the_list(app, call, backfilled, clock):
    # Given a compacted ledger item naming the 4 runs still queued
    clock.advance(minutes=3)
    _sweeper(app).sweep(clock.now())
    store = app.services.runs.runs
    # When one of them is cancelled
    store.transition(backfilled["waiting"][0], RunState.CANCELLED, clock.now())
    # Then the queued list holds the other three, and the cancelled one is found by state=cancelled
    ids = [r["id"] for r in _list(call, state="queued")["items"]]
    assert sorted(ids) == sorted(r.id for r in backfilled["waiting"][1:])
    cancelled = _list(call, state="cancelled", job_id=backfilled["job"].id)["items"]
    assert [r["id"] for r in cancelled] == [backfilled["waiting"][0].id]


@pytest.mark.units  # asserts read units: the metering adapter over the fakes' DynamoDB client
def test_another_tenants_ledger_items_are_not_read(app, call, history, clock):
    # Given globex with 100 runs queued (its own ledger item) besides acme's three
    services = app.services
    other = services.jobs.create("globex", JOB, T0)
    runs = [
        new_run(other, T0 - timedelta(minutes=m), Trigger.BACKFILL, T0, nonce=f"g{m}") for m in range(100)
    ]
    store = services.runs.runs
    store.announce(runs)
    for run in runs:
        store.put_announced(run)
    meter = history["meter"]
    meter.reset()
    # When acme lists its queued runs
    ids = [r["id"] for r in _list(call, state="queued")["items"]]
    # Then it sees its three, having read none of globex's runs (they would cost 50 units)
    assert sorted(ids) == sorted(r.id for r in history["queued"])
    assert meter.snapshot()["dynamodb"]["rcu"] <= 5


def test_failed_lists_dead_letters_newest_failure_first_without_replays_or_discarded(
    app, call, history, clock
):
    # Given a second and a third failed run, dead-lettered later than the first
    services = app.services
    store = services.runs.runs
    job = history["job"]
    later = []
    for i, minutes in enumerate((100, 50)):
        run = new_run(job, T0 - timedelta(minutes=minutes), Trigger.BACKFILL, T0, nonce=f"x{i}")
        failed = replace(
            run, state=RunState.FAILED, dead_lettered_at=T0 + timedelta(minutes=i + 1), error="e"
        )
        store.create(failed)
        later.append(failed)
    # When the newest is discarded and the tenant's failed runs are listed
    assert call("DELETE", f"/dead-letters/{later[1].id}", headers=ACME)["statusCode"] == 200
    page = _list(call, state="failed")
    # Then they come newest dead-lettered first, the discarded one left out (it is still failed by id)
    assert [r["id"] for r in page["items"]] == [later[0].id, history["failed"].id]
    assert page["next_cursor"] is None
    assert body_of(call("GET", f"/runs/{later[1].id}", headers=ACME))["state"] == "failed"
    # And with job_id and since as filters
    assert [
        r["id"] for r in _list(call, state="failed", job_id=job.id, since="2026-03-02T10:00:00Z")["items"]
    ] == [later[0].id]


def test_a_cursor_of_another_layout_is_a_400(call, history):
    # Given a cursor of the queued list / When it is handed to the failed list / Then 400, not 500
    first = _list(call, state="queued", limit=1)
    response = call("GET", "/runs", query={"state": "failed", "cursor": first["next_cursor"]}, headers=ACME)
    assert response["statusCode"] == 400
