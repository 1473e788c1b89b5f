"""End to end through the real embedded mode: pause and resume of per-second jobs under each misfire policy.

One scenario for the module, on the real clock: four per-second ``demo.echo`` jobs with a 1 s misfire
grace (policies ``run_once``, ``run_all``, ``skip``, and ``run_all`` resumed with a ``skip`` override)
run, are paused for several seconds, resumed, run again and are paused for good. Each test then checks
one job's exact run records: the runs queued ahead at the pause are withdrawn, then decided again at the
resume like every occurrence missed while paused: what was late by more than the grace follows the
policy (``misfire`` skips, ``catchup`` runs); everything after runs on schedule; and no occurrence is
lost or doubled.

The embedded mode runs with a 2 s look-ahead (see :mod:`tests.local.e2e_helpers`), so a pause of
seconds outlasts the runs queued ahead and reaches the misfire policy.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from jobsched.cli.client import ApiClient
from tests.local.conftest import wait_for
from tests.local.e2e_helpers import EmbeddedProcess, job, parse, runs_of

pytestmark = pytest.mark.slow

TENANT, TOKEN = "e2e", "tok-e2e-pause"
GRACE = timedelta(seconds=1)
PAUSE_SECONDS = 8.0  # > look-ahead (2 s) + grace (1 s) + a tick: several occurrences misfire
SECOND = timedelta(seconds=1)
TERMINAL = {"succeeded", "failed", "cancelled", "skipped"}

# scenario name -> (the job's misfire policy, the resume call's override)
POLICIES = {
    "run_once": ("run_once", None),
    "run_all": ("run_all", None),
    "skip": ("skip", None),
    "override": ("run_all", "skip"),
}


@dataclass
class PausedJob:
    """What happened to one job: its pause and resume as the API answered them, and its runs."""

    job_id: str
    paused_at: datetime
    #: The client's clock after the pause answered: a run due between paused_at and then that a worker
    #: claimed before the withdrawal reached it runs as an ordinary run (docs/semantics/runs.md).
    pause_answered_at: datetime
    withdrawn: set[str]
    resumed: dict[str, Any]
    resumed_at: datetime
    #: The client's clock before the resume request and after its answer: the resume decided the
    #: missed occurrences between the two (the answer's updated_at may be a later tick's advance).
    resume_sent_at: datetime
    resume_answered_at: datetime
    runs: list[dict[str, Any]]  # every run scheduled up to the final pause, oldest first

    def claimed_during_pause(self) -> list[dict[str, Any]]:
        """Runs due while the pause was answering that a worker claimed before the withdrawal reached
        them: not withdrawn, so not decided by the resume."""
        during = [r for r in self.runs if self.paused_at < parse(r["scheduled_at"]) <= self.pause_answered_at]
        return [r for r in during if r["id"] not in self.withdrawn]

    def after_pause(self) -> list[dict[str, Any]]:
        """Runs scheduled after the first pause, withdrawn ones included: the resume decided them all."""
        claimed = {r["id"] for r in self.claimed_during_pause()}
        return [r for r in self.runs if parse(r["scheduled_at"]) > self.paused_at and r["id"] not in claimed]

    def misfired(self) -> list[dict[str, Any]]:
        return [r for r in self.after_pause() if r["skip_reason"] == "misfire" or r["trigger"] == "catchup"]

    def on_time_after_resume(self) -> list[dict[str, Any]]:
        misfired = {r["id"] for r in self.misfired()}
        return [r for r in self.after_pause() if r["id"] not in misfired]


def _succeeded(client: ApiClient, job_id: str, after: datetime | None = None) -> int:
    return sum(
        1
        for r in runs_of(client, job_id)
        if r["state"] == "succeeded" and (after is None or parse(r["scheduled_at"]) > after)
    )


def _queued_ahead(client: ApiClient, job_id: str) -> bool:
    """Whether the job has a run queued for at least half a second from now."""
    soon = datetime.now(UTC) + timedelta(milliseconds=500)
    return any(r["state"] == "queued" and parse(r["scheduled_at"]) > soon for r in runs_of(client, job_id))


def _all_final(client: ApiClient, job_id: str, until: datetime) -> list[dict[str, Any]] | None:
    runs = [r for r in runs_of(client, job_id) if parse(r["scheduled_at"]) <= until]
    return runs if all(r["state"] in TERMINAL for r in runs) else None


@pytest.fixture(scope="module")
def scenario() -> Iterator[dict[str, PausedJob]]:
    """Given four per-second jobs that ran, were paused for 8 s, resumed, ran again and were paused."""
    process = EmbeddedProcess({TENANT: TOKEN}, tick_seconds=1.0)
    try:
        process.wait_ready()
        client = process.client(TENANT)
        ids = {
            name: client.create_job(
                job(
                    f"e2e.misfire.{name}",
                    "* * * * * *",
                    "demo.echo",
                    misfire_policy=policy,
                    misfire_grace_seconds=int(GRACE.total_seconds()),
                )
            )["id"]
            for name, (policy, _) in POLICIES.items()
        }
        for job_id in ids.values():
            wait_for(lambda job_id=job_id: _succeeded(client, job_id) >= 2, timeout=60, interval=0.3)
        paused, pause_answered = {}, {}
        for name, job_id in ids.items():
            # A run queued ahead is there to withdraw (on a busy machine the ticks can fall behind)
            wait_for(lambda j=job_id: _queued_ahead(client, j), timeout=30, interval=0.1)
            paused[name] = client.pause_job(job_id)
            pause_answered[name] = datetime.now(UTC)
        time.sleep(PAUSE_SECONDS)  # the pause itself: occurrences come due while nothing dispatches them
        resumed, sent, answered = {}, {}, {}
        for name, job_id in ids.items():
            sent[name] = datetime.now(UTC)
            resumed[name] = client.resume_job(job_id, misfire_policy=POLICIES[name][1])
            answered[name] = datetime.now(UTC)
        finals: dict[str, datetime] = {}
        for name, job_id in ids.items():
            resumed_at = parse(resumed[name]["updated_at"])
            wait_for(lambda j=job_id, t=resumed_at: _succeeded(client, j, t + SECOND) >= 2, timeout=60)
            finals[name] = parse(client.pause_job(job_id)["updated_at"])
        yield {
            name: PausedJob(
                job_id=job_id,
                paused_at=parse(paused[name]["updated_at"]),
                pause_answered_at=pause_answered[name],
                withdrawn=set(paused[name]["withdrawn_runs"]),
                resumed=resumed[name],
                resumed_at=parse(resumed[name]["updated_at"]),
                resume_sent_at=sent[name],
                resume_answered_at=answered[name],
                runs=wait_for(lambda j=job_id, t=finals[name]: _all_final(client, j, t), timeout=60),
            )
            for name, job_id in ids.items()
        }
    finally:
        process.stop()


# --- every policy -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(POLICIES))
def test_every_occurrence_is_one_run_and_none_is_lost(scenario: dict[str, PausedJob], name: str) -> None:
    # Then the job's runs are one per second, without a gap or a double, across the pause
    instants = [parse(r["scheduled_at"]) for r in scenario[name].runs]
    assert len(instants) > PAUSE_SECONDS
    assert instants == [instants[0] + i * SECOND for i in range(len(instants))]
    assert {r["trigger"] for r in scenario[name].runs} <= {"schedule", "catchup"}


@pytest.mark.parametrize("name", list(POLICIES))
def test_the_runs_the_pause_withdrew_are_decided_again_on_resume(
    scenario: dict[str, PausedJob], name: str
) -> None:
    paused = scenario[name]
    by_id = {r["id"]: r for r in paused.runs}
    # Then the pause withdrew at least one run queued ahead, each due after the pause
    assert paused.withdrawn
    assert all(parse(by_id[run_id]["scheduled_at"]) > paused.paused_at for run_id in paused.withdrawn)
    # And the resume decided each of them like any occurrence missed while paused (issue 10): none is
    # left skipped for reason paused, each is a catch-up run or a misfire skip of the policy
    assert not [r for r in paused.runs if r["skip_reason"] == "paused"]
    decided = {r["id"] for r in paused.misfired()} | {r["id"] for r in paused.on_time_after_resume()}
    assert paused.withdrawn <= decided
    # And everything due up to the pause ran, and so did a run due while the pause answered that a
    # worker had claimed before its withdrawal reached it: an ordinary run, never skipped as well
    before = [r for r in paused.runs if parse(r["scheduled_at"]) <= paused.paused_at]
    before += paused.claimed_during_pause()
    assert before and all((r["state"], r["trigger"]) == ("succeeded", "schedule") for r in before)


@pytest.mark.parametrize("name", list(POLICIES))
def test_after_the_resume_the_job_runs_on_schedule(scenario: dict[str, PausedJob], name: str) -> None:
    paused = scenario[name]
    on_time = paused.on_time_after_resume()
    # Then what was not misfired ran as scheduled: due no earlier than the grace before the resume
    assert len(on_time) >= 2
    for run in on_time:
        assert (run["state"], run["trigger"], run["skip_reason"]) == ("succeeded", "schedule", None)
        assert parse(run["scheduled_at"]) >= paused.resume_sent_at - GRACE
    # And the misfired ones are older than every on-time one, and at least two were missed
    misfired = paused.misfired()
    assert len(misfired) >= 2
    assert max(parse(r["scheduled_at"]) for r in misfired) < min(parse(r["scheduled_at"]) for r in on_time)
    assert all(parse(r["scheduled_at"]) < paused.resume_answered_at - GRACE for r in misfired)


# --- per policy -------------------------------------------------------------------------------------


def _shape(runs: list[dict[str, Any]]) -> list[tuple[str, str, str | None]]:
    return [(r["state"], r["trigger"], r["skip_reason"]) for r in runs]


def test_run_once_fires_the_latest_misfire_and_skips_the_others(scenario: dict[str, PausedJob]) -> None:
    misfired = scenario["run_once"].misfired()
    # Then the latest missed occurrence ran as a catch-up run; the older ones are skipped (misfire)
    skipped = ("skipped", "schedule", "misfire")
    assert _shape(misfired) == [skipped] * (len(misfired) - 1) + [("succeeded", "catchup", None)]


def test_run_all_fires_every_misfire(scenario: dict[str, PausedJob]) -> None:
    misfired = scenario["run_all"].misfired()
    # Then every missed occurrence ran, each as a catch-up run
    assert _shape(misfired) == [("succeeded", "catchup", None)] * len(misfired)


def test_skip_fires_no_misfire(scenario: dict[str, PausedJob]) -> None:
    misfired = scenario["skip"].misfired()
    # Then every missed occurrence is skipped (misfire) and none ran
    assert _shape(misfired) == [("skipped", "schedule", "misfire")] * len(misfired)
    assert all(r["attempts"] == [] for r in misfired)


def test_a_resume_override_replaces_the_jobs_policy_for_the_backlog(scenario: dict[str, PausedJob]) -> None:
    paused = scenario["override"]
    # Then the job (run_all) resumed with skip skipped every missed occurrence
    misfired = paused.misfired()
    assert _shape(misfired) == [("skipped", "schedule", "misfire")] * len(misfired)
    # And the override was for that backlog only: the job's own policy is unchanged
    assert paused.resumed["misfire_policy"] == "run_all"
