"""Settings from the environment and the metering size rules (both pure)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from jobsched.aws.metering import item_size, read_units, serialize, write_units
from jobsched.core.backpressure import QueueLimit
from jobsched.runtime import resources as r
from jobsched.runtime.settings import ConfigurationError, Settings

ENV = {
    r.ENV_JOBS_TABLE: "jobs",
    r.ENV_RUNS_TABLE: "runs",
    r.ENV_LEASES_TABLE: "leases",
    **{spec.env_var: f"https://sqs.local/q-{spec.kind}" for spec in r.QUEUES},
}


def test_settings_from_a_complete_environment_round_trip():
    settings = Settings.from_env(ENV | {r.ENV_SHARDS: "8", r.ENV_BUCKET: "b"})
    assert settings.shards == 8 and settings.bucket == "b" and settings.queue_url("high").endswith("q-high")
    assert Settings.from_env(settings.to_env()) == settings


def test_backpressure_defaults_hold_back_low_by_depth_and_age_and_never_default():
    # Given no backpressure variable / Then low has depth 1000 and age 900 s, default neither
    settings = Settings.from_env(ENV)
    assert settings.backpressure == {"low": QueueLimit(1000, 900), "default": QueueLimit(0, 0)}
    assert Settings.from_env(settings.to_env()) == settings


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"DEPTH_LOW": "0", "AGE_SECONDS_LOW": "0"}, {"low": QueueLimit(0, 0), "default": QueueLimit(0, 0)}),
        ({"DEPTH_DEFAULT": "250"}, {"low": QueueLimit(1000, 900), "default": QueueLimit(250, 0)}),
        ({"AGE_SECONDS_DEFAULT": "120"}, {"low": QueueLimit(1000, 900), "default": QueueLimit(0, 120)}),
    ],
)
def test_backpressure_per_priority_follows_its_variables_and_round_trips(env, expected):
    # Given JOBSCHED_BACKPRESSURE_<DEPTH|AGE_SECONDS>_<PRIORITY> / Then each priority's limits follow
    settings = Settings.from_env(ENV | {f"JOBSCHED_BACKPRESSURE_{k}": v for k, v in env.items()})
    assert settings.backpressure == expected
    assert Settings.from_env(settings.to_env()) == settings


@pytest.mark.parametrize(("raw", "days"), [(None, r.DEFAULT_RETENTION_DAYS), ("1", 1), ("400", 400)])
def test_retention_days_defaults_and_round_trips(raw, days):
    # Given the variable unset or a number of days / Then the setting follows it and survives to_env
    env = ENV if raw is None else ENV | {r.ENV_RETENTION_DAYS: raw}
    settings = Settings.from_env(env)
    assert settings.retention_days == days
    assert Settings.from_env(settings.to_env()) == settings


@pytest.mark.parametrize("missing", [r.ENV_RUNS_TABLE, r.ENV_QUEUE_URL_PREFIX + "LOW"])
def test_a_missing_variable_is_named(missing):
    env = {k: v for k, v in ENV.items() if k != missing}
    with pytest.raises(ConfigurationError, match=missing):
        Settings.from_env(env)


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        (r.ENV_SHARDS, "zero", "must be an integer"),
        (r.ENV_SHARDS, "0", "must be >= 1"),
        (r.ENV_LOOKAHEAD_SECONDS, "1000", "SQS delay cap"),
        (r.ENV_ENQUEUE_HORIZON_SECONDS, "901", "SQS delay cap"),
        (r.ENV_BACKPRESSURE_DEPTH_PREFIX + "LOW", "-1", "must be between 0 and 1000000"),
        (r.ENV_BACKPRESSURE_DEPTH_PREFIX + "LOW", "many", "must be an integer"),
        (r.ENV_BACKPRESSURE_AGE_PREFIX + "DEFAULT", "119", "must be 0 \\(off\\) or >= 120"),
        (r.ENV_BACKPRESSURE_AGE_PREFIX + "LOW", "43201", "must be between 0 and 43200"),
        (r.ENV_RETENTION_DAYS, "0", "must be >= 1"),
        (r.ENV_RETENTION_DAYS, "30d", "must be an integer"),
        (r.ENV_RETENTION_DAYS, "3651", "must be <= 3650"),
    ],
)
def test_malformed_tunables_are_refused(name, value, message):
    with pytest.raises(ConfigurationError, match=message):
        Settings.from_env(ENV | {name: value})


def test_item_size_follows_the_dynamodb_rules():
    # names + values: "pk"(2) + "abc"(3); "n"(1) + 123 (3 digits -> 1 + 2); "b"(1) + bool(1)
    assert item_size(serialize({"pk": "abc", "n": 123, "b": True})) == 2 + 3 + 1 + 3 + 1 + 1


@pytest.mark.parametrize(("size", "wru"), [(1, 1), (1024, 1), (1025, 2), (4000, 4)])
def test_write_units_are_per_started_kilobyte(size, wru):
    assert write_units(size) == wru


def test_read_units_are_per_4kb_and_halved_when_eventually_consistent():
    assert read_units(4096, consistent=True) == 1 and read_units(4097, consistent=False) == 1


def test_the_embedded_mode_s_retention_in_seconds_replaces_the_days_and_round_trips():
    # Given JOBSCHED_RETENTION_SECONDS (set only by jobsched dev --retention-minutes)
    settings = Settings.from_env(ENV | {r.ENV_RETENTION_SECONDS: "900"})
    # Then the retention is those seconds, whatever the days say, and it survives to_env
    assert settings.retention == timedelta(seconds=900)
    assert Settings.from_env(settings.to_env()) == settings
    # And without it, the days
    assert Settings.from_env(ENV | {r.ENV_RETENTION_DAYS: "3"}).retention == timedelta(days=3)


def test_a_retention_under_ten_minutes_is_refused():
    with pytest.raises(ConfigurationError, match=f"{r.ENV_RETENTION_SECONDS} must be >= 600"):
        Settings.from_env(ENV | {r.ENV_RETENTION_SECONDS: "599"})


def test_the_embedded_mode_s_sweeper_grace_is_read_round_trips_and_defaults_to_two_minutes():
    # Given no JOBSCHED_SWEEPER_GRACE_SECONDS (as on AWS: infra never sets it), the grace is 120 s
    assert Settings.from_env(ENV).sweeper_grace_seconds == 120
    assert r.ENV_SWEEPER_GRACE_SECONDS not in Settings.from_env(ENV).to_env()
    # Given 15 (jobsched dev --sweeper-grace-seconds 15), it is 15 and survives to_env
    settings = Settings.from_env(ENV | {r.ENV_SWEEPER_GRACE_SECONDS: "15"})
    assert settings.sweeper_grace_seconds == 15 and Settings.from_env(settings.to_env()) == settings
    # And under 10 s it is refused, naming the variable
    with pytest.raises(ConfigurationError, match=f"{r.ENV_SWEEPER_GRACE_SECONDS} must be >= 10"):
        Settings.from_env(ENV | {r.ENV_SWEEPER_GRACE_SECONDS: "9"})


def test_the_fair_share_is_read_survives_to_env_and_a_bad_one_names_the_variable():
    # Given the stack's variables with the share on / Then the settings carry it, and round-trip
    settings = Settings.from_env(
        ENV | {r.ENV_TENANT_SLOTS: "default=20,high=20,low=5", r.ENV_FAIR_SHARE: "0.8"}
    )
    assert settings.fair_share == 0.8 and settings.tenant_slots["default"] == 20
    assert Settings.from_env(settings.to_env()) == settings
    # Given it unset (the share off) / Then None: the slots stay JOBSCHED_TENANT_SLOTS
    assert Settings.from_env(ENV).fair_share is None
    for bad in ("1.5", "x", "0"):
        with pytest.raises(ConfigurationError, match=r.ENV_FAIR_SHARE):
            Settings.from_env(ENV | {r.ENV_FAIR_SHARE: bad})
