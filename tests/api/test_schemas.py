"""Request-model checks that protect the stores: what a DynamoDB item cannot hold is refused."""

from __future__ import annotations

import pytest

from jobsched.api.schemas import iso_z
from jobsched.api.storable import check_storable


@pytest.mark.parametrize(
    "value",
    [
        1,
        -1.5,
        0,
        0.0,
        10**37,
        10**38 - 1,
        -(10**38 - 1),
        99999999999999978859343891977453174784,
        9.999999999999998e37,
        1e37,
        1e-130,
        -2.5e-100,
        "x" * 1000,
        None,
        True,
        [1, {"a": [2]}],
    ],
)
def test_storable_values_pass(value):
    check_storable({"v": value})


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (10**38, "at most 38 digits"),
        (-(10**38), "at most 38 digits"),
        # the same number written as a float: refused alike (decision 0025), 1e125 included
        (1e38, "at most 38 digits"),
        (1e125, "at most 38 digits"),
        (1e-131, "magnitude"),
        (1.2345678901234567e-140, "magnitude"),
    ],
)
def test_unstorable_numbers_are_named_by_path(value, problem):
    with pytest.raises(ValueError, match=problem) as raised:
        check_storable({"outer": [{"v": value}]})
    assert "the value at outer[0].v" in str(raised.value)


def test_nesting_beyond_dynamodb_limit_is_refused():
    value: dict = {}
    for _ in range(32):
        value = {"n": value}
    with pytest.raises(ValueError, match="nested more than 32 levels"):
        check_storable(value)


def test_iso_z_is_utc_with_milliseconds():
    from datetime import datetime, timedelta, timezone

    at = datetime(2026, 3, 29, 3, 0, 0, 123456, tzinfo=timezone(timedelta(hours=2)))
    assert iso_z(at) == "2026-03-29T01:00:00.123Z"


def test_iso_z_refuses_naive_datetimes():
    from datetime import datetime

    with pytest.raises(ValueError, match="naive"):
        iso_z(datetime(2026, 1, 1))
