"""The pure rules of dead-letter notifications: the notify shape, the topic allow-list, the body."""

from __future__ import annotations

import json

import pytest

from jobsched.core.errors import ValidationError
from jobsched.core.messages import RunMessage
from jobsched.core.notify import (
    notification_of,
    notify_of_snapshot,
    subject_of,
    topic_allowed,
    validate_notify,
)


@pytest.mark.parametrize(
    "value",
    [
        {"sns_topic_arn": "arn:aws:sns:eu-west-1:123456789012:team-payments"},
        {"sns_topic_arn": "arn:aws:sns:us-gov-west-1:123456789012:ops.fifo"},
        {"sns_topic_arn": "arn:aws-cn:sns:cn-north-1:123456789012:ops"},
        {"webhook": "https://hooks.example.com/jobsched?team=a"},
        {"webhook": "http://10.0.0.1:8080/x"},  # a literal private host is the policy's call, not the shape's
        {},
        None,
    ],
)
def test_valid_notify_shapes_are_kept(value):
    assert validate_notify(value) == (value or {})


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        ("https://hooks.example.com", "must be an object"),
        ({"sns": "x"}, "unknown notify fields: sns"),
        ({"sns_topic_arn": "arn:aws:sqs:eu-west-1:123456789012:q"}, "not an SNS topic ARN"),
        ({"sns_topic_arn": "arn:aws:sns:eu-west-1:1234:t"}, "12-digit account"),
        ({"sns_topic_arn": 42}, "not an SNS topic ARN"),
        ({"webhook": "hooks.example.com/x"}, "absolute http:// or https://"),
        ({"webhook": "file:///etc/passwd"}, "absolute http:// or https://"),
        ({"webhook": "https://a:b@hooks.example.com"}, "credentials"),
        ({"webhook": "https://hooks.example.com:99999/"}, "not a valid URL"),
        ({"webhook": ""}, "1-2048 characters"),
    ],
)
def test_invalid_notify_shapes_name_the_field(value, needle):
    with pytest.raises(ValidationError, match=needle) as raised:
        validate_notify(value)
    assert raised.value.field.startswith("notify")


@pytest.mark.parametrize(
    ("arn", "patterns", "allowed"),
    [
        ("arn:aws:sns:eu-west-1:123456789012:team-a", ["arn:aws:sns:eu-west-1:123456789012:team-*"], True),
        ("arn:aws:sns:us-east-1:123456789012:team-a", ["arn:aws:sns:*:123456789012:team-*"], True),
        ("arn:aws:sns:eu-west-1:123456789012:other", ["arn:aws:sns:eu-west-1:123456789012:team-*"], False),
        ("arn:aws:sns:eu-west-1:123456789012:team-a", ["arn:aws:sns:eu-west-1:123456789012:team-?"], True),
        ("arn:aws:sns:eu-west-1:123456789012:team-ab", ["arn:aws:sns:eu-west-1:123456789012:team-?"], False),
        ("arn:aws:sns:eu-west-1:123456789012:t.x", ["arn:aws:sns:eu-west-1:123456789012:t.?"], True),
        ("arn:aws:sns:eu-west-1:123456789012:tax", ["arn:aws:sns:eu-west-1:123456789012:t.x"], False),
        ("arn:aws:sns:eu-west-1:123456789012:team-a", [], False),
    ],
)
def test_topic_allow_list_uses_iam_wildcards_only(arn, patterns, allowed):
    assert topic_allowed(arn, patterns) is allowed


def test_the_notification_names_the_run_its_error_attempts_and_the_replay_route():
    # Given a dead-lettered run item as stored
    item = {
        "job_id": "j1",
        "run_key": "20261201T090000.000Z",
        "tenant": "acme",
        "dl_at": "2026-12-01T09:00:01.000Z",
        "dl_reason": "exhausted",
        "error": "RetryableError: boom",
        "attempt": 3,
    }
    # Then its notification says all of it, with an id per dead letter
    body = notification_of(item)
    run_id = "j1.20261201T090000.000Z"
    assert body == {
        "type": "dead_letter",
        "id": f"{run_id}@2026-12-01T09:00:01.000Z",
        "tenant": "acme",
        "job_id": "j1",
        "run_id": run_id,
        "reason": "exhausted",
        "error": "RetryableError: boom",
        "attempts": 3,
        "failed_at": "2026-12-01T09:00:01.000Z",
        "run": f"/runs/{run_id}",
        "replay": {"method": "POST", "path": f"/dead-letters/{run_id}/replay"},
    }
    assert len(subject_of(body)) <= 100 and subject_of(body).isascii()


def test_the_jobs_notify_travels_in_the_message_and_is_read_back_from_the_snapshot():
    from datetime import UTC, datetime

    at = datetime(2026, 12, 1, 9, tzinfo=UTC)
    msg = RunMessage(
        run_id="j1.20261201T090000.000Z", job_id="j1", tenant="acme", attempt=1, scheduled_at=at, due_at=at,
        target={"handler": "demo.echo"}, notify={"webhook": "https://h.example.com"},
    )  # fmt: skip
    assert RunMessage.from_json(msg.to_json()).notify == {"webhook": "https://h.example.com"}
    assert notify_of_snapshot(msg.to_json()) == {"webhook": "https://h.example.com"}
    plain = RunMessage.from_json(msg.to_json().replace(',"notify":{"webhook":"https://h.example.com"}', ""))
    assert "notify" not in json.loads(plain.to_json()) and notify_of_snapshot(plain.to_json()) == {}
    assert notify_of_snapshot(None) == {} and notify_of_snapshot("not json") == {}
