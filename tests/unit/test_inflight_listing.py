"""The in-flight ledger as a listing source (decision 0021): which entries a tenant's listing examines,
and when a sweep rewrites a big item with only its runs still in flight. Pure: no AWS, no clock."""

from __future__ import annotations

from datetime import UTC, datetime

from jobsched.core.inflight import COMPACT_MIN_RUNS, compacted, ledger_items, listed_entries

AT = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)


def _item(entries: list[str], tenants: list[str] | None) -> dict:
    [item] = ledger_items(entries, AT, lambda: "n1", tenants=tenants or ())
    return item


def test_ledger_items_record_their_runs_tenants_once_sorted():
    # Given entries of two tenants / When their ledger item is built / Then it names both tenants
    item = _item(["20260302T120000Z#job-b", "20260302T120001Z#job-a"], ["globex", "acme", "acme"])
    assert item["tenants"] == ["acme", "globex"]


def test_listed_entries_skip_other_tenants_items_and_keep_old_items_without_tenants():
    # Given an acme item, a globex item and an item written before items carried their tenants
    acme = _item(["20260302T110000Z#job-a"], ["acme"])
    globex = _item(["20260302T113000Z#job-g"], ["globex"])
    old = {k: v for k, v in _item(["20260302T100000Z#job-o"], ["x"]).items() if k != "tenants"}
    # When acme's entries are listed / Then its item's and the old item's, newest scheduled first
    assert listed_entries([acme, globex, old], "acme") == ["20260302T110000Z#job-a", "20260302T100000Z#job-o"]


def test_listed_entries_filter_by_job_since_and_cursor_and_dedupe():
    # Given two items naming overlapping runs of two jobs
    one = _item(["20260302T090000Z#job-a", "20260302T100000Z#job-a", "20260302T110000Z#job-b"], ["acme"])
    two = _item(["20260302T100000Z#job-a", "20260302T120000Z#job-a"], ["acme"])
    # When filtered / Then each entry once, newest first, within the bounds
    assert listed_entries([one, two], "acme", job_id="job-a") == [
        "20260302T120000Z#job-a",
        "20260302T100000Z#job-a",
        "20260302T090000Z#job-a",
    ]
    assert listed_entries([one, two], "acme", since_key="20260302T100000Z") == [
        "20260302T120000Z#job-a",
        "20260302T110000Z#job-b",
        "20260302T100000Z#job-a",
    ]
    assert listed_entries([one, two], "acme", before="20260302T110000Z#job-b") == [
        "20260302T100000Z#job-a",
        "20260302T090000Z#job-a",
    ]


def _big(n: int) -> dict:
    return _item([f"20260302T{i // 60:02d}{i % 60:02d}00Z#job-a" for i in range(n)], ["acme"])


def test_a_big_item_mostly_settled_is_rewritten_with_its_runs_in_flight():
    # Given an item of 100 runs of which 3 are still in flight
    item = _big(100)
    still = item["runs"][:3]
    # When compacted / Then the new item keeps its partition, written-at and due_from, names the 3
    new = compacted(item, still, ["acme"], lambda: "n2")
    assert new is not None
    assert (new["job_id"], new["due_from"], new["runs"], new["tenants"]) == (
        item["job_id"],
        item["due_from"],
        sorted(still),
        ["acme"],
    )
    assert new["run_key"] == item["run_key"].rsplit("#", 1)[0] + "#n2"


def test_small_or_busy_or_settled_items_are_not_rewritten():
    # A small item, an item with over a quarter in flight, an item with nothing in flight
    small = _big(COMPACT_MIN_RUNS - 1)
    assert compacted(small, small["runs"][:1], ["acme"], lambda: "n") is None
    busy = _big(100)
    assert compacted(busy, busy["runs"][:26], ["acme"], lambda: "n") is None
    assert compacted(busy, [], [], lambda: "n") is None
