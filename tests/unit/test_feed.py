"""The tenant run feed's pure steps: key layout, grouping into feed items, merging a bucket back."""

from __future__ import annotations

import itertools

import pytest

from jobsched.core.errors import ValidationError
from jobsched.core.feed import (
    MAX_FEED_ITEM_BYTES,
    FeedEntry,
    bucket_of,
    bucket_upper_bound,
    entry_key,
    feed_items,
    feed_partition,
    merge_bucket,
)
from jobsched.core.models import parse_run_id, validate_job_id


def _nonces():
    counter = itertools.count()
    return lambda: f"n{next(counter)}"


def test_a_feed_partition_can_never_be_a_job_id_nor_part_of_a_run_id():
    # Given the feed partition of a tenant (the Runs table's job_id attribute of its feed items)
    partition = feed_partition("acme")
    # Then no job id validation and no run id parse accepts it, so no run route can address it
    with pytest.raises(ValidationError):
        validate_job_id(partition)
    for crafted in (
        f"{partition}.20260302T120000.000Z",
        f"{partition}.20260302T12#n0",
        "feed.20260302T12#n0",
    ):
        with pytest.raises(ValidationError):
            parse_run_id(crafted)


@pytest.mark.parametrize(
    ("key", "bucket"),
    [
        ("20260329T013000.250Z", "20260329T01"),  # a run key
        ("20260329T015959.999Z.mabc#jX", "20260329T01"),  # a manual run's feed entry
        ("20260329T01#n0", "20260329T01"),  # a feed item's sort key
    ],
)
def test_the_bucket_is_the_hour_of_the_scheduled_instant(key, bucket):
    assert bucket_of(key) == bucket


def test_the_bucket_upper_bound_sits_between_its_feed_items_and_the_next_bucket():
    bound = bucket_upper_bound("20260329T013000.250Z#j1")
    assert "20260329T01#zzzzzzzzzzzz" < bound < "20260329T02#"


def test_an_entry_names_the_run_item_key():
    assert entry_key("20260329T013000.250Z.mabc#jX") == {
        "job_id": "jX",
        "run_key": "20260329T013000.250Z.mabc",
    }


def test_entries_are_grouped_one_item_per_tenant_and_hour():
    # Given runs of two tenants across two hours (written in no particular order)
    entries = [
        FeedEntry("acme", "20260329T013000.000Z#j1"),
        FeedEntry("globex", "20260329T013000.000Z#j2"),
        FeedEntry("acme", "20260329T020000.000Z#j1"),
        FeedEntry("acme", "20260329T014500.000Z#j3"),
    ]
    # When grouped into feed items
    items = feed_items(entries, _nonces())
    # Then one item per (tenant, hour), each holding its entries newest first, no expiry given
    assert [(i["job_id"], i["run_key"][:11], i["runs"]) for i in items] == [
        ("feed#acme", "20260329T01", ["20260329T014500.000Z#j3", "20260329T013000.000Z#j1"]),
        ("feed#acme", "20260329T02", ["20260329T020000.000Z#j1"]),
        ("feed#globex", "20260329T01", ["20260329T013000.000Z#j2"]),
    ]
    assert len({i["run_key"] for i in items}) == 3 and not any("expires_at" in i for i in items)


@pytest.mark.parametrize(
    ("expiries", "expected"),
    [((100, 300, 200), 300), ((100, None), None), ((None,), None)],
)
def test_a_feed_item_expires_with_its_last_run_and_never_before_a_run_without_expiry(expiries, expected):
    entries = [FeedEntry("acme", f"20260329T0130{i:02d}.000Z#j", x) for i, x in enumerate(expiries)]
    [item] = feed_items(entries, _nonces())
    assert item.get("expires_at") == expected


def test_a_bucket_too_large_for_one_item_is_split_and_loses_nothing():
    # Given more entries of one tenant and hour than fit in one feed item
    entries = [
        FeedEntry("acme", f"20260329T01{i // 1000:02d}{i % 1000:03d}.000Z#j{'x' * 40}") for i in range(9000)
    ]
    # When grouped
    items = feed_items(entries, _nonces())
    # Then several items, each under the size limit, together holding every entry once
    assert len(items) > 1
    assert all(sum(len(e) + 1 for e in i["runs"]) < MAX_FEED_ITEM_BYTES for i in items)
    assert sorted(e for i in items for e in i["runs"]) == sorted(e.entry for e in entries)


def test_merging_a_bucket_dedupes_sorts_newest_first_and_keeps_what_is_before_the_cursor():
    items = [
        {"runs": ["20260329T013000.000Z#j1", "20260329T011500.000Z#j2"]},
        {"runs": ["20260329T014500.000Z#j1", "20260329T013000.000Z#j1"]},  # a re-tick repeats an entry
        {},
    ]
    assert merge_bucket(items) == [
        "20260329T014500.000Z#j1",
        "20260329T013000.000Z#j1",
        "20260329T011500.000Z#j2",
    ]
    assert merge_bucket(items, before="20260329T013000.000Z#j1") == ["20260329T011500.000Z#j2"]
