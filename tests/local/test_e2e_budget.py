"""End to end through the real embedded mode (issue 32 §3, decision 0062): once a tenant's budget is
below its month-to-date spend, its job's new occurrences are recorded skipped with reason budget (and
the job goes on holding); when the administrator clears the budget, the next tick decides the held
occurrences under the job's misfire policy (run_once here), reviving the budget records in place, and
the schedule goes on. Another tenant's job is never held. Bounds are generous: the machine is shared."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.local.conftest import wait_for
from tests.local.e2e_helpers import EmbeddedProcess, job, parse, runs_of

pytestmark = pytest.mark.slow

TOKENS = {"acme": "tok-e2e-acme", "beta": "tok-e2e-beta", "ops": "tok-e2e-ops"}
EVERY_2S = "*/2 * * * * *"


@pytest.fixture(scope="module")
def process() -> Iterator[EmbeddedProcess]:
    process = EmbeddedProcess(TOKENS, admins=["ops"])
    try:
        process.wait_ready()
        yield process
    finally:
        process.stop()


def _by_reason(runs: list[dict], reason: str) -> list[dict]:
    return [r for r in runs if r["state"] == "skipped" and r.get("skip_reason") == reason]


def test_a_capped_tenant_is_held_and_resumes_under_its_misfire_policy(process: EmbeddedProcess) -> None:
    acme, beta, ops = process.client("acme"), process.client("beta"), process.client("ops")
    # Given acme's job every 2 s (misfire grace 3 s) has run, so acme has spent something this month
    created = acme.create_job(job("e2e.budget", EVERY_2S, "demo.echo", misfire_grace_seconds=3))
    other = beta.create_job(job("e2e.budget.other", EVERY_2S, "demo.echo"))
    wait_for(lambda: acme.own_budget()["spent_usd"] > 0.000002, timeout=90, interval=0.5)
    # When an administrator sets acme's budget below that spend
    answer = ops.put_budget("acme", 0.000001)
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
    ops.delete_budget("acme")
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
