"""The bucket's contract: jobsched.aws.outputs.OutputStore over InMemoryObjects and over S3 (moto)."""

from __future__ import annotations

import pytest

from jobsched.aws.outputs import INLINE_OUTPUT_LIMIT, ObjectExpired, OutputStore
from jobsched.core.models import make_run_id
from tests.aws.conftest import T0

RUN = make_run_id("job1", T0)


def test_a_large_output_goes_to_the_bucket_and_comes_back(backend):
    outputs = OutputStore(backend.s3, backend.settings.bucket)
    small, no_key = outputs.place_output("acme", RUN, 1, {"n": 1})
    assert (small, no_key) == ({"n": 1}, None)
    big = {"blob": "x" * (INLINE_OUTPUT_LIMIT + 1)}
    inline, key = outputs.place_output("acme", RUN, 2, big)
    assert inline is None and key is not None and key.startswith("outputs/acme/")
    assert outputs.get_json(key) == big


def test_a_missing_object_reads_as_expired(backend):
    outputs = OutputStore(backend.s3, backend.settings.bucket)
    with pytest.raises(ObjectExpired):
        outputs.get_json("outputs/acme/job1/r1/attempt-9.json")
