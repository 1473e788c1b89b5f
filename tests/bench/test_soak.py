"""The soak benchmark's pure parts: the memory trend and the report (the soak itself runs jobsched dev
for minutes of real time: `jobsched bench --soak`, not a test)."""

from __future__ import annotations

from jobsched.bench.soak import _slope_per_minute, report


def test_the_memory_trend_is_the_least_squares_slope_in_mb_per_minute():
    # Given RSS rising 2 MB every 30 s, then a flat series / Then 4 MB a minute, then 0
    assert _slope_per_minute([(0, 100.0), (30, 102.0), (60, 104.0), (90, 106.0)]) == 4.0
    assert _slope_per_minute([(0, 50.0), (60, 50.0)]) == 0.0
    assert _slope_per_minute([(0, 50.0)]) == 0.0


def test_the_report_names_each_process_and_both_minutes():
    lag = {"runs": 60, "started": 60, "p50_ms": 5.0, "p99_ms": 40.0, "max_ms": 41.0}
    figures = {
        "per_second_jobs": 1,
        "wall_seconds": 60.0,
        "cpu_percent": 3.2,
        "processes": {"dev": {"cpu_percent": 1.0, "rss_mb": {"start": 1.0, "end": 2.0, "max": 2.0}}},
        "rss_growth_mb_per_minute": {"dev": 0.5},
        "lag": {"first_minute": lag, "last_minute": lag},
    }
    text = report(figures)
    assert "CPU 3.2 % of one core" in text and "dev" in text
    assert "lag first minute: 60/60 runs started" in text and "lag last minute" in text
