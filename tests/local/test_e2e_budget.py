"""End to end through the real embedded mode (issue 32 §3, decision 0062): once a tenant's budget is
below its month-to-date spend, its job's new occurrences are recorded skipped with reason budget (and
the job goes on holding); when the administrator clears the budget, the next tick decides the held
occurrences under the job's misfire policy (run_once here), reviving the budget records in place, and
the schedule goes on. Another tenant's job is never held. A run queued ahead (SQS delay) before its
tenant reached the budget is recorded skipped with reason budget when its time comes, never started,
and decided again under the misfire policy once the budget is cleared; a manual trigger of the capped
tenant is refused with 409 budget_exhausted. Bounds are generous: the machine is shared."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from jobsched.client import ApiError
from tests.local.conftest import wait_for
from tests.local.e2e_helpers import EmbeddedProcess, job, parse, run_state, runs_of

pytestmark = pytest.mark.slow

#: acme, beta and ops (an administrator): tenants of this module's own in the embedded mode it shares
#: with other modules (tests/local/shared_embedded.py). The runs queued ahead need a mode of their own
#: (a 40 s enqueue horizon): ``ahead`` below.
ACME, BETA, OPS = "budget-acme", "budget-beta", "budget-ops"
SHARED_TENANTS = {ACME: "tok-e2e-budget-acme", BETA: "tok-e2e-budget-beta", OPS: "tok-e2e-budget-ops"}
SHARED_ADMINS = [OPS]
EVERY_2S = "*/2 * * * * *"


@pytest.fixture(scope="module")
def process(shared_process: EmbeddedProcess) -> EmbeddedProcess:
    return shared_process


def _by_reason(runs: list[dict], reason: str) -> list[dict]:
    return [r for r in runs if r["state"] == "skipped" and r.get("skip_reason") == reason]


def test_a_capped_tenant_is_held_and_resumes_under_its_misfire_policy(process: EmbeddedProcess) -> None:
    acme, beta, ops = process.client(ACME), process.client(BETA), process.client(OPS)
    # Given acme's job every 2 s (misfire grace 3 s) has run, so acme has spent something this month
    created = acme.create_job(job("e2e.budget", EVERY_2S, "demo.echo", misfire_grace_seconds=3))
    other = beta.create_job(job("e2e.budget.other", EVERY_2S, "demo.echo"))
    wait_for(lambda: acme.own_budget()["spent_usd"] > 0.000002, timeout=90, interval=0.5)
    # When an administrator sets acme's budget below that spend
    answer = ops.put_budget(ACME, 0.000001)
    assert answer["state"] == "capped", answer
    # Then acme's new occurrences are recorded skipped with reason budget (several, over some seconds)
    capped = wait_for(
        lambda: (found := _by_reason(runs_of(acme, created["id"]), "budget")) and len(found) >= 4 and found,
        timeout=90,
        interval=0.5,
    )
    first_capped = parse(capped[0]["scheduled_at"])
    # and no run of acme's job scheduled after the first of them ran; beta's job was not held
    later = [r for r in runs_of(acme, created["id"]) if parse(r["scheduled_at"]) >= first_capped]
    assert all(r["state"] == "skipped" for r in later), [(r["scheduled_at"], r["state"]) for r in later]
    assert any(
        r["state"] == "succeeded" and parse(r["scheduled_at"]) > first_capped
        for r in runs_of(beta, other["id"])
    )
    # When the administrator clears the budget
    ops.delete_budget(ACME)
    assert acme.own_budget()["state"] == "none"

    # Then the held occurrences are decided again under run_once: the budget records are revived in
    # place (the older ones skipped, reason misfire; the latest late one a catch-up run), and acme's
    # schedule goes on with runs that succeed
    def resumed() -> list[dict] | None:
        runs = runs_of(acme, created["id"])
        held = [r for r in runs if parse(r["scheduled_at"]) >= first_capped]
        catchup = [r for r in held if r.get("trigger") == "catchup" and r["state"] == "succeeded"]
        fresh = [r for r in held if r.get("trigger") == "schedule" and r["state"] == "succeeded"]
        return runs if catchup and fresh and not _by_reason(held, "budget") else None

    runs = wait_for(resumed, timeout=90, interval=0.5)
    assert len({r["id"] for r in runs}) == len(runs)  # each occurrence listed once, records revived in place
    revived_ids = {r["id"] for r in capped}
    after = {r["id"]: r for r in runs}
    assert all(after[i]["state"] != "skipped" or after[i]["skip_reason"] == "misfire" for i in revived_ids)
    assert _by_reason([after[i] for i in revived_ids], "misfire")


# --- runs queued ahead, and on-demand runs (decision 0062, amended) ----------------------------------

AHEAD_TOKENS = {"gamma": "tok-e2e-gamma", "ops": "tok-e2e-ops"}
EVERY_5S = "*/5 * * * * *"


@pytest.fixture(scope="module")
def ahead() -> Iterator[EmbeddedProcess]:
    """The embedded mode queuing runs 40 s ahead (SQS delays), as a deployment queues them 900 s ahead."""
    process = EmbeddedProcess(AHEAD_TOKENS, admins=["ops"], enqueue_horizon_seconds=40)
    try:
        process.wait_ready()
        yield process
    finally:
        process.stop()


def test_a_run_queued_ahead_becomes_skipped_budget_and_a_trigger_is_refused(ahead: EmbeddedProcess) -> None:
    gamma, ops = ahead.client("gamma"), ahead.client("ops")
    # Given gamma has a budget it is under, and a job every 5 s whose runs are queued up to 40 s ahead
    ops.put_budget("gamma", 1000.0)
    created = gamma.create_job(job("e2e.budget.ahead", EVERY_5S, "demo.echo", misfire_grace_seconds=3))
    wait_for(lambda: gamma.own_budget()["spent_usd"] > 0.000002, timeout=90, interval=0.5)

    def queued_ahead() -> list[dict] | None:
        soon = datetime.now(UTC) + timedelta(seconds=15)  # time to set the budget first, under load
        found = [
            r
            for r in runs_of(gamma, created["id"])
            if r["state"] == "queued" and parse(r["scheduled_at"]) > soon
        ]
        return found or None

    waiting = wait_for(queued_ahead, timeout=90, interval=0.5)
    # When an administrator sets gamma's budget below its spend (the run was queued before that)
    assert ops.put_budget("gamma", 0.000001)["state"] == "capped"
    first = waiting[0]
    # Then that run, when its time comes, is recorded skipped with reason budget, never started
    skipped = wait_for(
        lambda: run_state(gamma, first["id"], "skipped", "succeeded", "running"), timeout=90, interval=0.5
    )
    assert (skipped["state"], skipped.get("skip_reason")) == ("skipped", "budget"), skipped
    assert not skipped.get("attempts") and skipped.get("started_at") is None
    # And a manual trigger is refused with 409 budget_exhausted, naming how to raise the budget
    with pytest.raises(ApiError) as refused:
        gamma.trigger_job(created["id"])
    assert (refused.value.status, refused.value.code) == (409, "budget_exhausted")
    assert "PUT /admin/tenants/gamma/budget" in refused.value.message
    # When the administrator clears the budget
    ops.delete_budget("gamma")

    # Then the skipped queued-ahead occurrence is decided again under the misfire policy (revived in
    # place: skipped for misfire, or run), and the schedule goes on with runs that succeed
    def decided() -> dict | None:
        run = gamma.get_run(first["id"])
        later = [
            r
            for r in runs_of(gamma, created["id"])
            if r["state"] == "succeeded" and parse(r["scheduled_at"]) > parse(first["scheduled_at"])
        ]
        return run if run.get("skip_reason") != "budget" and later else None

    run = wait_for(decided, timeout=90, interval=0.5)
    assert run["state"] in ("skipped", "queued", "running", "succeeded"), run
    assert run["state"] != "skipped" or run["skip_reason"] == "misfire", run
