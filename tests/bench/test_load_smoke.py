"""The locust load of ``make bench-load``, run with a handful of requests: it runs, counts, and finds
every triggered run once (a smoke test of the locustfile and the ledger check, not a measurement)."""

from __future__ import annotations

import pytest

from jobsched.bench import load

pytestmark = pytest.mark.slow


@pytest.mark.timeout(300)
def test_a_tiny_load_runs_clean(capsys):
    # When two users of two tenants make a few requests each
    status = load.main(
        ["--users", "2", "--tenants", "2", "--seconds", "8", "--requests", "12", "--settle", "60"]
    )
    out = capsys.readouterr().out
    # Then no request failed and no run was lost, duplicated or left unfinished
    assert status == 0, out
    assert "lost 0, duplicated 0, unexpected 0, unfinished 0" in out
    assert "| **all** |" in out
