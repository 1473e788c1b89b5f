"""`jobsched preview`: JSON, table, errors (exit status 2 with the message on stderr)."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

from jobsched.cli.commands import preview as preview_command
from jobsched.cli.main import COMMAND_MODULES, main

AFTER = "2026-03-07T12:00:00Z"


def test_json_prints_exactly_one_array(capsys):
    # Given a wall-clock schedule across New York's spring-forward gap
    # When previewed with --json
    status = main(
        ["preview", "30 2 * * *", "--tz", "America/New_York", "--after", AFTER, "--count", "2", "--json"]
    )
    # Then the output is one JSON array of the documented objects
    out = capsys.readouterr().out
    assert status == 0
    assert json.loads(out) == [
        {"at": "2026-03-08T07:00:00Z", "local": "2026-03-08T03:00:00-04:00", "note": "dst_gap_shifted"},
        {"at": "2026-03-09T06:30:00Z", "local": "2026-03-09T02:30:00-04:00", "note": None},
    ]


def test_policies_are_passed_through(capsys):
    argv = ["preview", "30 2 * * *", "--tz", "America/New_York", "--after", AFTER, "--count", "1"]
    status = main([*argv, "--dst-gap", "skip", "--json"])
    assert status == 0
    assert json.loads(capsys.readouterr().out)[0]["at"] == "2026-03-09T06:30:00Z"


def test_table_marks_dst_affected_fires(capsys):
    # Given the default output format
    status = main(
        [
            "preview",
            "30 1 * * *",
            "--tz",
            "Europe/London",
            "--after",
            "2026-10-24T12:00:00+00:00",
            "--count",
            "3",
            "--dst-overlap",
            "both",
        ]
    )
    lines = capsys.readouterr().out.splitlines()
    # Then there is a header and one line per fire, the doubled ones starred and explained
    assert status == 0
    assert lines[0].split() == ["#", "at", "(UTC)", "local", "note"]
    assert "* DST overlap: first occurrence" in lines[1]
    assert "* DST overlap: second occurrence" in lines[2]
    assert lines[3].rstrip().endswith("2026-10-26T01:30:00+00:00")


def test_nearest_weekday_skips_months_without_that_day(capsys):
    # Given the reproduction: 31W from May 2026 (June has no 31st)
    status = main(
        ["preview", "cron(0 18 31W * ? *)", "--after", "2026-05-01T00:00:00Z", "--count", "4", "--json"]
    )
    # Then June and September have no fire; 31 May (Sunday) and 31 Oct (Saturday) move to the Friday
    assert status == 0
    assert [f["at"] for f in json.loads(capsys.readouterr().out)] == [
        "2026-05-29T18:00:00Z",
        "2026-07-31T18:00:00Z",
        "2026-08-31T18:00:00Z",
        "2026-10-30T18:00:00Z",
    ]


def test_nearest_weekday_to_29_february_fires_only_in_leap_years(capsys):
    # Given 29W in February of 2026-2030, where only 2028 has a 29 February
    argv = ["preview", "cron(30 8 29W FEB ? 2026-2030)", "--after", "2026-01-01T00:00:00Z", "--count", "5"]
    status = main([*argv, "--json"])
    # Then there is exactly one fire, on 29 February 2028 (not 27 Feb 2026, 26 Feb 2027, 28 Feb 2029...)
    assert status == 0
    assert [f["at"] for f in json.loads(capsys.readouterr().out)] == ["2028-02-29T08:30:00Z"]


def test_nearest_weekday_that_never_fires_exits_2(capsys):
    # Given 30W in February, which has no 30th (as a plain 30 FEB is rejected)
    assert main(["preview", "cron(0 18 30W FEB ? *)"]) == 2
    assert "never fires" in capsys.readouterr().err


def test_invalid_expression_exits_2_with_the_message_on_stderr(capsys):
    status = main(["preview", "30 2 * * 8"])
    captured = capsys.readouterr()
    assert status == 2
    assert captured.out == ""
    assert "day-of-week field '8' is out of range 0-7" in captured.err


def test_unknown_zone_exits_2(capsys):
    assert main(["preview", "@daily", "--tz", "Nowhere/City"]) == 2
    assert "Nowhere/City" in capsys.readouterr().err


def test_after_without_offset_exits_2(capsys):
    assert main(["preview", "@daily", "--after", "2026-03-07T12:00:00"]) == 2
    assert "has no UTC offset" in capsys.readouterr().err


def test_count_out_of_range_exits_2(capsys):
    assert main(["preview", "@daily", "--count", "0"]) == 2
    assert "out of range 1-1000" in capsys.readouterr().err


def test_default_after_is_now(capsys, monkeypatch):
    # Given no --after, and the CLI's clock fixed at 10:20:30 UTC
    monkeypatch.setattr(preview_command, "now", lambda: datetime(2026, 6, 1, 10, 20, 30, tzinfo=UTC))
    # When previewing an hourly schedule
    assert main(["preview", "@hourly", "--count", "1", "--json"]) == 0
    # Then the first fire is the next hour after that instant
    assert json.loads(capsys.readouterr().out)[0]["at"] == "2026-06-01T11:00:00Z"


def test_preview_is_registered():
    assert "preview" in COMMAND_MODULES


def test_installed_console_script_prints_one_json_array():
    # Given the installed `jobsched` script next to this interpreter
    script = Path(sys.executable).with_name("jobsched")
    # When run as a subprocess
    done = subprocess.run(
        [
            str(script),
            "preview",
            "*/15 * * * *",
            "--tz",
            "America/New_York",
            "--after",
            "2026-03-08T06:30:00Z",
            "--count",
            "3",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    # Then it exits 0 and stdout is a single JSON array of regular 15-minute fires across the gap
    assert done.returncode == 0, done.stderr
    assert [f["at"] for f in json.loads(done.stdout)] == [
        "2026-03-08T06:45:00Z",
        "2026-03-08T07:00:00Z",
        "2026-03-08T07:15:00Z",
    ]


def test_installed_console_script_exits_2_on_bad_input():
    script = Path(sys.executable).with_name("jobsched")
    done = subprocess.run(
        [str(script), "preview", "rate(5 weeks)", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert "rate unit 'weeks' is not allowed" in done.stderr
