"""Due partitions and their owners (docs/decisions/0016-due-partitions.md): pure arithmetic."""

from __future__ import annotations

import pytest

from jobsched.core.errors import ValidationError
from jobsched.core.ids import (
    DUE_PARTITIONS,
    legacy_keys_of,
    partition_for,
    partition_key,
    partitions_of,
    shard_for,
    validate_shard_count,
)


@pytest.mark.parametrize("shards", range(1, DUE_PARTITIONS + 1))
def test_every_partition_has_exactly_one_owner_for_any_shard_count(shards):
    # Given a shard count / When listing each shard's partitions / Then they cover 0..31 once each
    owned = [p for k in range(shards) for p in partitions_of(k, shards)]
    assert sorted(owned) == list(range(DUE_PARTITIONS))


def test_a_jobs_partition_does_not_depend_on_the_shard_count_and_its_owner_reads_it():
    ids = [f"job{i}" for i in range(200)]
    assert {partition_for(i) for i in ids} == set(range(DUE_PARTITIONS))
    for job_id in ids:
        for shards in (1, 2, 3, 4, 7, 32):
            assert partition_for(job_id) in partitions_of(shard_for(job_id, shards), shards)


def test_partition_keys_cannot_collide_with_the_old_shard_numbers():
    assert partition_key(7) == "p7"
    assert not any(k.startswith("p") for k in legacy_keys_of(0, 1))


def test_legacy_keys_of_a_count_cover_every_old_shard_number_once():
    # The version before partitions allowed up to 256 shards: bare keys "0".."255"
    keys = [k for shard in range(3) for k in legacy_keys_of(shard, 3)]
    assert sorted(keys, key=int) == [str(j) for j in range(256)]


@pytest.mark.parametrize("bad", [0, 33, -1, True, 2.0, "4"])
def test_a_shard_count_outside_1_to_32_is_refused_naming_the_bound(bad):
    with pytest.raises(ValidationError, match=r"1\.\.32"):
        validate_shard_count(bad)


@pytest.mark.parametrize(("shard", "shards"), [(4, 4), (-1, 4), (True, 2)])
def test_a_shard_outside_its_count_is_refused(shard, shards):
    with pytest.raises(ValidationError, match="shard must be an integer"):
        partitions_of(shard, shards)
