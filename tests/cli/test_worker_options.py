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


def test_a_malformed_task_size_stops_the_start_naming_the_variable(monkeypatch, capsys) -> None:
    # Given a complete configuration but a task size that is no number
    for name in [n for n in os.environ if n.startswith("JOBSCHED_")]:
        monkeypatch.delenv(name)
    for name in ("JOBSCHED_JOBS_TABLE", "JOBSCHED_RUNS_TABLE", "JOBSCHED_LEASES_TABLE"):
        monkeypatch.setenv(name, "t")
    for kind in ("HIGH", "DEFAULT", "LOW", "LONG", "CONTAINER"):
        monkeypatch.setenv(f"JOBSCHED_QUEUE_URL_{kind}", f"https://sqs.us-east-1.amazonaws.com/1/{kind}")
    monkeypatch.setenv("JOBSCHED_CONTAINER_CPU", "one vcpu")
    # When the worker starts, Then it stops with exit status 2 naming the variable
    assert main(["worker", "--pool", "container"]) == 2
    assert "JOBSCHED_CONTAINER_CPU must be a whole number" in capsys.readouterr().err
