"""A run's phases (decision 0064): queued, waiting for a limit, running, retrying, from the instants
its item records. Each row: a run as stored at a fixed instant -> its phases as (phase, start s, end s,
attempt), seconds after T (None: still in it)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from jobsched.core.models import Attempt, Run, RunState, make_run_id
from jobsched.core.phases import run_phases

T = datetime(2026, 12, 5, 3, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T + timedelta(seconds=seconds)


def run(state, attempts=(), *, created=0, due=0, finished=None, waits=None, first_wait=None, replays=()):
    tries = [
        Attempt(attempt=i + 1, started_at=at(s), finished_at=None if e is None else at(e), outcome=o)
        for i, (s, e, o) in enumerate(attempts)
    ]
    return Run(
        id=make_run_id("job1", T),
        job_id="job1",
        tenant="acme",
        state=RunState(state),
        scheduled_at=T,
        due_at=at(due),
        created_at=at(created),
        attempt=len(tries),
        attempts=tries,
        finished_at=None if finished is None else at(finished),
        limit_waits={n: at(s) for n, s in (waits or {}).items()},
        first_waited_at=None if first_wait is None else at(first_wait),
        replays=[{"action": "replay", "at": at(s).isoformat()} for s in replays],
    )


def seconds(phases):
    return [
        (
            p.phase,
            (p.start - T).total_seconds(),
            None if p.end is None else (p.end - T).total_seconds(),
            p.attempt,
        )
        for p in phases
    ]


@pytest.mark.parametrize(
    ("case", "stored", "expected"),
    [
        (
            "succeeded at once",
            run("succeeded", [(3, 13, "succeeded")], finished=13),
            [("queued", 0, 3, 1), ("running", 3, 13, 1)],
        ),
        (
            "queued ahead: queued from its due instant, not its creation",
            run("succeeded", [(61, 62, "succeeded")], created=-300, due=60, finished=62),
            [("queued", 60, 61, 1), ("running", 61, 62, 1)],
        ),
        (
            "failed once, backed off, held by a limit, then succeeded",
            run("succeeded", [(1, 5, "retrying"), (40, 45, "succeeded")], waits={2: 35}, finished=45),
            [
                ("queued", 0, 1, 1),
                ("running", 1, 5, 1),
                ("retrying", 5, 35, 2),
                ("waiting", 35, 40, 2),
                ("running", 40, 45, 2),
            ],
        ),
        ("still queued", run("queued"), [("queued", 0, None, 1)]),
        ("held by a limit now", run("queued", waits={1: 4}), [("queued", 0, 4, 1), ("waiting", 4, None, 1)]),
        ("running now", run("running", [(2, None, None)]), [("queued", 0, 2, 1), ("running", 2, None, 1)]),
        (
            "backing off now",
            run("retrying", [(2, 3, "retrying")]),
            [("queued", 0, 2, 1), ("running", 2, 3, 1), ("retrying", 3, None, 2)],
        ),
        (
            "taken over: the lost attempt ran until the next one began",
            run("succeeded", [(2, None, "lost"), (70, 75, "succeeded")], finished=75),
            [("queued", 0, 2, 1), ("running", 2, 70, 1), ("running", 70, 75, 2)],
        ),
        (
            "a dead letter replayed: queued again from the replay, nothing while it had ended",
            run("succeeded", [(1, 2, "failed"), (302, 303, "succeeded")], replays=[300], finished=303),
            [("queued", 0, 1, 1), ("running", 1, 2, 1), ("queued", 300, 302, 2), ("running", 302, 303, 2)],
        ),
        (
            "a run stored before per-attempt waits: its first wait goes before the next attempt",
            run("succeeded", [(9, 10, "succeeded")], first_wait=4, finished=10),
            [("queued", 0, 4, 1), ("waiting", 4, 9, 1), ("running", 9, 10, 1)],
        ),
        ("cancelled while queued", run("cancelled", finished=7), [("queued", 0, 7, 1)]),
        (
            "cancelled while backing off",
            run("cancelled", [(1, 2, "retrying")], finished=20),
            [("queued", 0, 1, 1), ("running", 1, 2, 1), ("retrying", 2, 20, 2)],
        ),
        ("a skipped occurrence never queued", run("skipped", finished=0), []),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_phases_from_the_recorded_instants(case, stored, expected):
    assert seconds(run_phases(stored)) == expected


def test_per_attempt_waits_survive_the_item_round_trip():
    stored = run("queued", waits={1: 4, 2: 90})
    item = stored.to_item()
    assert sorted(k for k in item if k.startswith("limit_wait_")) == ["limit_wait_1", "limit_wait_2"]
    assert Run.from_item(item).limit_waits == {1: at(4), 2: at(90)}
