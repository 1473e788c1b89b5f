"""The ``aws`` fixture (tests/aws/conftest.py) works in moto whatever endpoints the process environment
names: an embedded mode started in the same xdist worker (tests/local/conftest.py's package-scoped
``machinery``) sets ``AWS_ENDPOINT_URL`` and ``AWS_ENDPOINT_URL_<SERVICE>`` for as long as it runs, and a
test that uses the ``aws`` fixture beside it must not send its calls to that emulator."""

from __future__ import annotations

import pytest

from tests.aws.conftest import AwsEnv

#: The two endpoint variables an embedded mode exports (jobsched/local/embedded.py) and two more of the
#: per-service ones botocore honours, each naming a closed port.
LEFT_BEHIND = ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL_SQS", "AWS_ENDPOINT_URL_S3")


@pytest.fixture
def endpoints_left_set(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in LEFT_BEHIND:
        monkeypatch.setenv(name, "http://127.0.0.1:9")


def test_the_aws_fixture_provisions_in_moto_while_another_emulators_endpoints_are_set(
    endpoints_left_set: None, aws: AwsEnv
) -> None:
    # Given endpoint variables naming a closed port (set before the fixture) / When the fixture provisions
    # / Then every table and queue is in moto, and reading them goes to moto too
    tables = aws.clients.dynamodb.list_tables()["TableNames"]
    assert aws.settings.jobs_table in tables and aws.settings.runs_table in tables
    attributes = aws.clients.sqs.get_queue_attributes(
        QueueUrl=aws.settings.queue_url("default"), AttributeNames=["QueueArn"]
    )["Attributes"]
    assert attributes["QueueArn"].endswith(aws.settings.queue_url("default").rsplit("/", 1)[1])
