"""``jobsched worker``'s options are checked before anything starts: a value out of range is a usage
error (exit 2) that names the range."""

from __future__ import annotations

import os

import pytest

from jobsched.cli.main import main


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--lease-seconds", "2", "--lease-seconds: 2 must be 3..3600 seconds"),
        ("--lease-seconds", "soon", "--lease-seconds: soon is not a number of seconds"),
        ("--wait-seconds", "21", "--wait-seconds: 21 must be 0..20 seconds"),
    ],
)
def test_an_option_out_of_range_is_a_usage_error_naming_the_range(option, value, message, capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["worker", "--pool", "container", option, value])
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


def test_a_lease_in_range_passes_the_options_and_stops_at_the_missing_configuration(
    monkeypatch, capsys
) -> None:
    for name in [n for n in os.environ if n.startswith("JOBSCHED_")]:
        monkeypatch.delenv(name)
    assert main(["worker", "--pool", "container", "--lease-seconds", "10"]) == 2
    assert "error: configuration_error:" in capsys.readouterr().err
