"""A tenant's slots follow the pool's ceiling (decision 0057): ``max(slots, floor(ceiling * share))``,
exactly ``slots`` at the base ceiling ``ceil(slots / share)``, a raise given to a tenant alone but for
its head-room, and the share on by default."""

from __future__ import annotations

import pytest

from jobsched.core.errors import ValidationError
from jobsched.core.shares import (
    DEFAULT_FAIR_SHARE,
    MEASURED_FAIR_SHARE,
    MIN_FAIR_SHARE,
    pool_ceiling,
    tenant_slots_at,
)

SHARES = [round(MIN_FAIR_SHARE + i * 0.01, 2) for i in range(91)]  # 0.1, 0.11, ..., 1.0


def test_the_share_is_on_by_default_at_the_measured_share():
    assert DEFAULT_FAIR_SHARE == MEASURED_FAIR_SHARE == 0.8


@pytest.mark.parametrize("share", SHARES)
def test_at_the_base_ceiling_a_tenant_holds_exactly_its_slots(share):
    # Given every slots count from 1 to 1000 and its pool's base ceiling ceil(slots / share)
    for slots in range(1, 1001):
        base = pool_ceiling(slots, share)
        # Then the ceiling gives the tenant its slots back, no more (the head-room stays the others')
        assert tenant_slots_at(slots, share, base) == slots, (slots, share, base)
        assert tenant_slots_at(slots, share, None) == slots


@pytest.mark.parametrize(
    ("slots", "ceiling", "expected"),
    [
        (20, 25, 20),  # the base: 5 of head-room
        (20, 26, 20),  # floor(20.8)
        (20, 30, 24),  # a raise of 5: 4 to the tenant, 1 more head-room
        (20, 40, 32),
        (20, 120, 96),  # a forecast peak's raise: 24 of head-room
        (5, 7, 5),  # low's base: ceil(5 / 0.8)
        (5, 10, 8),
        (20, 10, 20),  # a ceiling below the base never takes a tenant below its slots
    ],
)
def test_a_raised_ceiling_raises_the_tenants_slots_but_for_its_head_room(slots, ceiling, expected):
    assert tenant_slots_at(slots, 0.8, ceiling) == expected
    assert ceiling - expected >= 1 or ceiling < pool_ceiling(slots, 0.8)  # some head-room is left


def test_floating_point_does_not_lose_a_slot():
    # 0.7 * 30 is 20.999999999999996 in binary floating point: still 21 slots
    assert tenant_slots_at(20, 0.7, 30) == 21
    assert tenant_slots_at(1, 0.3, 10) == 3


def test_a_share_out_of_range_is_refused_naming_the_field():
    with pytest.raises(ValidationError, match="fair_share"):
        tenant_slots_at(20, 1.5, 30)
