"""The deploy guard's comparison (jobsched/core/deploy_guard.py): what the deployed system refers to
(a ``GET /handlers`` document, as in docs/api.md) against the handlers of the code about to be
deployed. Tables of cases: each row a listing, a new code, and the problems expected."""

from __future__ import annotations

import pytest

from jobsched.core.deploy_guard import code_from, strandings
from tests.handlers_listing import entry, listing


def code(*versions: tuple[str, int, list[int]]) -> dict[str, dict[int, frozenset[int]]]:
    return code_from({"name": n, "version": v, "upgrades_from": u} for n, v, u in versions)


V1 = ("report", 1, [])
V2 = ("report", 2, [1])
V2_NO_UPGRADE = ("report", 2, [])
V3_FROM_2 = ("report", 3, [2])

# (why, listing, new code, expected [(name, version, counts)])
CASES = [
    (
        "the same code: nothing stranded",
        listing(entry("report", 1, newest=True, jobs=3, queued=2), unpinned={"report": {"1": 3}}),
        code(V1),
        [],
    ),
    (
        "v2 added beside v1: unpinned jobs upgrade from 1, nothing stranded",
        listing(entry("report", 1, newest=True, jobs=3, queued=2, retrying=1), unpinned={"report": {"1": 3}}),
        code(V1, V2),
        [],
    ),
    (
        "v1 removed while a run bound to it retries and a dead letter waits",
        listing(
            entry("report", 1, retrying=1, dead_lettered=2, run_ids=["r1", "r2", "r3"]),
            entry("report", 2, newest=True, jobs=4),
            unpinned={"report": {"1": 1, "2": 3}},
        ),
        code(V2),
        [("report", 1, {"retrying": 1, "dead_lettered": 2})],
    ),
    (
        "v1 removed while a job pins it",
        listing(entry("report", 1, jobs=1, job_ids=["j-pinned"]), entry("report", 2, newest=True)),
        code(V2),
        [("report", 1, {"jobs": 1})],
    ),
    (
        "v1 removed once drained: nothing refers to it",
        listing(
            entry("report", 1),
            entry("report", 2, newest=True, jobs=5, queued=5),
            unpinned={"report": {"2": 5}},
        ),
        code(V2),
        [],
    ),
    (
        "the whole name removed: its unpinned jobs and unbound queued runs are stranded too",
        listing(entry("report", 1, newest=True, jobs=2, queued=1), unpinned={"report": {"1": 2}}),
        code(("other", 1, [])),
        [("report", 1, {"jobs": 2, "queued": 1})],
    ),
    (
        "the whole name removed when nothing refers to it",
        listing(entry("report", 1, newest=True)),
        code(("other", 1, [])),
        [],
    ),
    (
        "v2 replaces v1 without an upgrader: unpinned jobs' v1 payloads cannot be taken",
        listing(entry("report", 1, newest=True, jobs=2, job_ids=["j1", "j2"]), unpinned={"report": {"1": 2}}),
        code(V1, V2_NO_UPGRADE),
        [("report", 2, {"jobs": 2})],
    ),
    (
        "the newest removed in the same deploy that adds its successor: unpinned jobs move, "
        "the queued count (unbound runs included) is refused",
        listing(entry("report", 2, newest=True, jobs=2, queued=1), unpinned={"report": {"2": 2}}),
        code(V3_FROM_2),
        [("report", 2, {"queued": 1})],
    ),
    (
        "the newest removed with nothing queued: its unpinned jobs upgrade from 2",
        listing(entry("report", 2, newest=True, jobs=2), unpinned={"report": {"2": 2}}),
        code(V3_FROM_2),
        [],
    ),
    (
        "unpinned jobs written for v1 when v3 only upgrades from 2",
        listing(entry("report", 2, newest=True, jobs=2), unpinned={"report": {"1": 1, "2": 1}}),
        code(("report", 2, [1]), V3_FROM_2),
        [("report", 3, {"jobs": 1})],
    ),
    (
        "jobs written before versions existed count as payload version 1",
        listing(entry("report", 1, newest=True, jobs=1), unpinned={"report": {"None": 1}}),
        code(V1, V3_FROM_2),
        [("report", 3, {"jobs": 1})],
    ),
    (
        "a handler already missing from the deployed code, still absent",
        listing(missing=(entry("gone", 4, dead_lettered=1, run_ids=["r9"]),)),
        code(V1),
        [("gone", 4, {"dead_lettered": 1})],
    ),
    (
        "unbound references to a missing name, still absent",
        listing(missing=(entry("gone", None, jobs=1, queued=3),)),
        code(V1),
        [("gone", None, {"jobs": 1, "queued": 3})],
    ),
    (
        "a missing handler restored by the new code",
        listing(missing=(entry("report", 1, retrying=1), entry("report", None, queued=1))),
        code(V1),
        [],
    ),
]


@pytest.mark.parametrize(("why", "refs", "new_code", "expected"), CASES, ids=[c[0] for c in CASES])
def test_strandings(why: str, refs: dict, new_code: dict, expected: list) -> None:
    # Given what the deployed system refers to and the new code's handlers, When they are compared
    problems = strandings(refs, new_code)
    # Then exactly the expected (name, version) are stranded, with the counts that refer to them
    found = [(p.name, p.version, {k: v for k, v in p.counts.items() if v}) for p in problems]
    assert found == expected, why


def test_a_problem_names_its_jobs_and_runs_and_what_the_new_code_has() -> None:
    # Given v1 with a retrying run and a pinned job, and new code with only v2
    refs = listing(
        entry("report", 1, jobs=1, retrying=1, job_ids=["j-1"], run_ids=["j-1.20261201T090000Z"]),
        entry("report", 2, newest=True),
    )
    # When compared
    (problem,) = strandings(refs, code(V2))
    # Then the line names the handler, version, counts and ids; the record has the same
    assert problem.render() == (
        "handler 'report' version 1 is not in the new code (it has version 2): 1 job, 1 retrying run; "
        "jobs j-1; runs j-1.20261201T090000Z"
    )
    assert problem.describe() == {
        "kind": "removed",
        "name": "report",
        "version": 1,
        "problem": "handler 'report' version 1 is not in the new code (it has version 2)",
        "jobs": 1,
        "queued": 0,
        "running": 0,
        "retrying": 1,
        "dead_lettered": 0,
        "examples": {"jobs": ["j-1"], "runs": ["j-1.20261201T090000Z"]},
    }


def test_a_payload_problem_names_the_versions_and_the_upgrades() -> None:
    refs = listing(entry("report", 1, newest=True, jobs=2, job_ids=["a", "b"]), unpinned={"report": {"1": 2}})
    (problem,) = strandings(refs, code(V1, V2_NO_UPGRADE))
    assert problem.render() == (
        "unpinned jobs of 'report' have payloads written for version 1: the new code's newest version 2 "
        "neither takes nor upgrades them (it upgrades from no version): 2 jobs; jobs a, b"
    )
    assert problem.describe()["payload_versions"] == [1]


def test_code_from_reads_the_registry_descriptions() -> None:
    described = [
        {"name": "report", "version": 1, "upgrades_from": []},
        {"name": "report", "version": 2, "upgrades_from": [1]},
    ]
    assert code_from(described) == {"report": {1: frozenset(), 2: frozenset({1})}}
