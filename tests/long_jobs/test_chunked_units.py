"""Chunked jobs, the pure parts: execution names, message recognition, registration rules."""

from __future__ import annotations

import json
import re

import pytest

import jobsched.long_jobs.demo  # noqa: F401  (registers demo.chunked_sum)
from jobsched.core.errors import PermanentError
from jobsched.long_jobs.chunk_runner import chunk_kind
from jobsched.long_jobs.chunked import ChunkedJob, chunked_job, execution_name, get_chunked
from jobsched.targets.registry import get_handler, unregister

RUN_ID = "job1.20260302T120000.000Z"
NAME = re.compile(r"^[A-Za-z0-9_-]{1,80}$")


def test_execution_name_is_deterministic_and_uses_the_safe_alphabet():
    # When the name of the same run is derived twice
    first, second = execution_name(RUN_ID), execution_name(RUN_ID)
    # Then it is the same, at most 80 characters of letters, digits, '-' and '_'
    assert first == second and NAME.match(first)
    assert first.startswith("job1_20260302T120000_000Z-")


def test_execution_name_of_a_very_long_run_id_still_fits_and_stays_distinct():
    # Given two run ids of 64-character job ids that differ only at the end of the suffix
    job = "j" * 64
    a, b = f"{job}.20260302T120000.000Z.m{'x' * 39}a", f"{job}.20260302T120000.000Z.m{'x' * 39}b"
    # Then both names fit in 80 characters and differ
    assert NAME.match(execution_name(a)) and NAME.match(execution_name(b))
    assert execution_name(a) != execution_name(b)


def test_a_replayed_run_gets_a_new_execution_name():
    # Then each replay generation names a different execution
    names = {execution_name(RUN_ID, generation) for generation in range(3)}
    assert len(names) == 3 and all(NAME.match(n) for n in names)


@pytest.mark.parametrize(
    ("body", "kind"),
    [
        (json.dumps({"v": 1, "kind": "chunk.run", "task_token": "t"}), "chunk.run"),
        (json.dumps({"v": 1, "kind": "chunk.failed"}), "chunk.failed"),
        (json.dumps({"v": 1, "run_id": RUN_ID, "attempt": 1}), None),  # a run message
        (json.dumps({"v": 2, "run_id": RUN_ID, "attempt": 1, "payload_version": 1}), None),  # a v2 one
        (json.dumps({"v": 1, "kind": "chunk.unknown"}), None),
        ("not json", None),
        ("[1, 2]", None),
    ],
)
def test_chunk_kind_recognises_only_workflow_messages(body, kind):
    assert chunk_kind(body) == kind


def test_a_chunked_job_called_as_a_plain_handler_fails_permanently_saying_why():
    # Given the demo chunked job as the registry holds it
    handler = get_handler("demo.chunked_sum")
    assert isinstance(handler, ChunkedJob)
    # When a worker without Step Functions calls it like any handler / Then a permanent error names the gap
    with pytest.raises(PermanentError, match="JOBSCHED_STATE_MACHINE_ARN"):
        handler({}, None)


def test_a_chunked_function_without_a_plan_is_refused_at_registration():
    with pytest.raises(TypeError, match="plan="):
        chunked_job("test.no_plan")(lambda chunk, ctx: None)


def test_a_plain_handler_is_not_a_chunked_job():
    import jobsched.targets.demo  # noqa: F401  (registers demo.echo)

    assert get_chunked("demo.echo") is None
    assert get_chunked("no.such.handler") is None


def test_three_functions_register_as_one_chunked_job():
    # Given plan, run_chunk and complete as functions
    def plan(payload, ctx):
        return [1, 2]

    def complete(payload, ctx, summary):
        return summary["chunks"]

    def run_chunk(chunk, ctx):
        return chunk * 10

    try:
        chunked_job("test.functions", plan=plan, complete=complete)(run_chunk)
        job = get_chunked("test.functions")
        # Then the registry holds one chunked job with the three steps
        assert job is not None
        assert (job.plan({}, None), job.run_chunk(2, None), job.complete({}, None, {"chunks": 2})) == (
            [1, 2],
            20,
            2,
        )
    finally:
        unregister("test.functions")


def test_the_demo_plan_splits_the_numbers_into_the_requested_chunks():
    job = get_chunked("demo.chunked_sum")
    assert job is not None
    chunks = job.plan({"numbers": [1, 2, 3, 4, 5, 6, 7], "chunks": 3, "item_seconds": 0}, None)
    assert [c["numbers"] for c in chunks] == [[1, 2, 3], [4, 5, 6], [7]]
