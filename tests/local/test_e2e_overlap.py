"""End to end through the real embedded mode: overlap policy ``skip`` on a job slower than its schedule.

A ``demo.sleep`` of 3 s scheduled every second with ``overlap_policy: skip`` runs for a while and is
paused; its exact run records then show one run at a time and every occurrence that came due while a
run was active recorded skipped with reason ``overlap``.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest

from tests.local.conftest import wait_for
from tests.local.e2e_helpers import EmbeddedProcess, job, parse, runs_of

pytestmark = pytest.mark.slow

TENANT, TOKEN = "e2e", "tok-e2e-overlap"
SLEEP_SECONDS = 3
TERMINAL = {"succeeded", "failed", "cancelled", "skipped"}


@pytest.fixture(scope="module")
def overlapping() -> Iterator[tuple[list[dict[str, Any]], set[str]]]:
    """Given a 3 s sleep every second with overlap skip, run until 3 runs succeeded, then paused.

    Yields the job's runs scheduled up to the pause (all ended) and the runs the pause withdrew."""
    process = EmbeddedProcess({TENANT: TOKEN}, tick_seconds=1.0)
    try:
        process.wait_ready()
        client = process.client(TENANT)
        created = client.create_job(
            job(
                "e2e.overlap",
                "* * * * * *",
                "demo.sleep",
                payload={"seconds": SLEEP_SECONDS},
                overlap_policy="skip",
                retry={"max_attempts": 1},
            )
        )
        wait_for(
            lambda: sum(r["state"] == "succeeded" for r in runs_of(client, created["id"])) >= 3,
            timeout=90,
            interval=0.5,
        )
        paused = client.pause_job(created["id"])
        until = parse(paused["updated_at"])

        def ended() -> list[dict[str, Any]] | None:
            runs = [r for r in runs_of(client, created["id"]) if parse(r["scheduled_at"]) <= until]
            return runs if all(r["state"] in TERMINAL for r in runs) else None

        yield wait_for(ended, timeout=60, interval=0.5), set(paused["withdrawn_runs"])
    finally:
        process.stop()


def _interval(run: dict[str, Any]) -> tuple[datetime, datetime]:
    return parse(run["started_at"]), parse(run["finished_at"])


def test_never_two_runs_at_once(overlapping: tuple[list[dict[str, Any]], set[str]]) -> None:
    runs, _ = overlapping
    # Then the runs that ran each slept their 3 s, one after the other: no two overlapped in time
    ran = sorted((r for r in runs if r["state"] == "succeeded"), key=_interval)
    assert len(ran) >= 3
    assert all(r["output"] == {"slept": SLEEP_SECONDS, "cancelled": False} for r in ran)
    for before, after in itertools.pairwise(ran):
        assert _interval(before)[1] <= _interval(after)[0]
    assert [r["state"] for r in runs if r["skip_reason"] is None] == ["succeeded"] * len(ran)


def test_occurrences_due_while_a_run_is_active_are_skipped_overlap(
    overlapping: tuple[list[dict[str, Any]], set[str]],
) -> None:
    runs, withdrawn = overlapping
    # Then every occurrence is one record: a run, or a skip (overlap; paused for the one queued ahead)
    instants = [parse(r["scheduled_at"]) for r in runs]
    assert instants == [instants[0] + timedelta(seconds=i) for i in range(len(instants))]
    assert {r["skip_reason"] for r in runs} <= {None, "overlap", "paused"}
    assert {r["id"] for r in runs if r["skip_reason"] == "paused"} <= withdrawn
    # And between two consecutive runs, at least the 2 occurrences due while the first slept were
    # skipped for overlap, each of them due while that run was active
    ran = [r for r in runs if r["state"] == "succeeded"]
    for before, after in itertools.pairwise(ran):
        between = [r for r in runs if before["scheduled_at"] < r["scheduled_at"] < after["scheduled_at"]]
        assert len(between) >= SLEEP_SECONDS - 1
        for skipped in between:
            assert (skipped["state"], skipped["skip_reason"], skipped["attempts"]) == (
                "skipped",
                "overlap",
                [],
            )
            assert parse(skipped["scheduled_at"]) <= _interval(before)[1]
