"""The listing benchmark: listing by state reads what is in flight, not the history (jobsched bench
--listing, decision 0021)."""

from __future__ import annotations

from jobsched.bench.listing import ListingConfig, report, run_listing


def test_listing_by_state_after_backfills_costs_what_is_in_flight_after_a_sweep():
    # Given two backfills of 60 runs each (one ledger item each), one in ten still queued, one failed
    figures = run_listing(ListingConfig(backfill=60, queued_every=10, limit=50))
    # Then the failed run is found in one page of one Query of the dead-letter index, no cursor after it
    for when in ("fresh", "swept"):
        failed = figures[when]["failed_all"]
        assert (failed["items"], failed["pages"], failed["dynamodb_requests"]) == (1, 1, 1)
        assert not failed["next_cursor_at_end"]
    # And every queued run (12 backfilled + the job's runs queued ahead) is in one page that ends
    assert figures["backfilled_queued"] == 12
    for when in ("fresh", "swept"):
        queued = figures[when]["tenant_queued"]
        assert queued["items"] >= 12 and not queued["next_cursor_at_end"]
    # And before the sweep the listing reads the 120 backfilled runs the big items name by Query, billed
    # by size: under a quarter of reading them by key (0.5 RRU each; decision 0035)
    assert figures["fresh"]["tenant_queued"]["rru"] < 120 * 0.5 / 4
    # And the sweep compacted both backfills' ledger items, so the listing after it reads the runs in
    # flight: at most each by key, one page of a Query that showed them apart, and the ledger's Queries
    assert figures["sweep"]["compacted"] == 2
    swept = figures["swept"]["tenant_queued"]
    assert swept["rru"] <= 0.5 * swept["items"] + 0.5 * -(-swept["items"] * 500 // 4096) + 4 * 0.5
    assert "swept tenant_queued" in report(figures)
