"""The embedded mode on resources that already exist (the rehearsal's deployed stack), and the
rehearsal's stand-in for API Gateway's IAM authorizer."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from jobsched.local.config import LocalConfig
from jobsched.local.embedded import EmbeddedMode
from jobsched.local.provision import Provisioned, provision
from jobsched.local.server import MotoServer
from jobsched.rehearsal.scenario import CALLER_HEADER, iam_gateway
from jobsched.runtime import resources

REGION = "us-east-1"
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": REGION}


def _provision(endpoint_url: str | None = None) -> Provisioned:
    clients = {
        name: boto3.client(name, region_name=REGION, endpoint_url=endpoint_url)
        for name in ("dynamodb", "sqs", "s3", "stepfunctions")
    }
    return provision(**clients, prefix="deployed", visibility_timeout_seconds=5400)


def test_provisioned_resources_are_found_again_from_their_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in CREDENTIALS.items():
        monkeypatch.setenv(key, value)
    with mock_aws():
        made = _provision()
        found = Provisioned.from_environment(made.environment(), boto3.client("sqs", region_name=REGION))
    assert found == made


def test_a_missing_variable_is_named() -> None:
    with pytest.raises(KeyError, match=resources.ENV_QUEUE_URL_PREFIX + "HIGH"):
        Provisioned.from_environment({}, sqs=None)


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[MotoServer]:
    for key, value in CREDENTIALS.items():
        monkeypatch.setenv(key, value)
    server = MotoServer()
    server.start({})
    yield server
    server.stop()


def test_the_embedded_mode_runs_on_existing_resources_without_a_server_of_its_own(
    server: MotoServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given resources made elsewhere (as by cdk deploy) and the variables that name them
    made = _provision(server.endpoint_url)
    existing = {**made.environment(), **CREDENTIALS, "AWS_ENDPOINT_URL": server.endpoint_url}
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://before")
    environ = os.environ  # the clients the embedded mode makes read the process environment
    off: dict[str, Any] = dict.fromkeys(("api", "dispatcher", "worker", "dlq_consumer", "sweeper"))
    mode = EmbeddedMode(
        LocalConfig(port=0), handlers=off, environ=environ, existing=existing, out=lambda _: None
    )
    # When it starts
    with mode:
        # Then it uses them as they are: no moto child started, nothing provisioned, the variables set
        assert mode.provisioned == made
        assert mode.server._process is None and mode.dynamodb_server._process is None
        assert environ[resources.ENV_RUNS_TABLE] == made.tables[resources.ENV_RUNS_TABLE]
        assert environ["AWS_ENDPOINT_URL"] == server.endpoint_url
        assert mode.clients["sqs"].meta.endpoint_url == server.endpoint_url
        tables = boto3.client("dynamodb", region_name=REGION, endpoint_url=server.endpoint_url).list_tables()
        assert len(tables["TableNames"]) == len(resources.TABLES)
    # And stopping restores the environment it found
    assert environ["AWS_ENDPOINT_URL"] == "http://before"
    assert resources.ENV_RUNS_TABLE not in environ


def echo(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """The handler the gateway test wraps: answers the event it was given."""
    return event


def test_the_iam_gateway_names_the_caller_as_api_gateway_does() -> None:
    handler = iam_gateway(f"{__name__}.echo")
    caller = "arn:aws:iam::123456789012:user/alice"
    event = handler({"headers": {CALLER_HEADER: caller, "host": "x"}, "requestContext": {}}, None)
    assert event["requestContext"]["authorizer"]["iam"]["userArn"] == caller
    assert event["requestContext"]["authorizer"]["iam"]["accountId"] == "123456789012"
    assert CALLER_HEADER not in event["headers"]  # the function never sees the stand-in's header


def test_the_iam_gateway_leaves_an_unsigned_request_unauthorized() -> None:
    event = iam_gateway(f"{__name__}.echo")({"headers": {}, "requestContext": {}}, None)
    assert "authorizer" not in event["requestContext"]


def test_the_iam_gateway_names_a_default_caller_for_requests_without_the_header() -> None:
    """Given the gateway the rehearsal puts before deploy-check (every request signed as the
    administrator), Then a request without the header is the administrator's, one with it its own."""
    admin, alice = "arn:aws:iam::123456789012:user/rehearsal-admin", "arn:aws:iam::123456789012:user/alice"
    handler = iam_gateway(f"{__name__}.echo", default_caller=admin)
    unsigned = handler({"headers": {}, "requestContext": {}}, None)
    assert unsigned["requestContext"]["authorizer"]["iam"]["userArn"] == admin
    named = handler({"headers": {CALLER_HEADER: alice}, "requestContext": {}}, None)
    assert named["requestContext"]["authorizer"]["iam"]["userArn"] == alice
