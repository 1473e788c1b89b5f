"""The HTTP client against a real local HTTP server: headers, bodies, paging, errors, SigV4."""

from __future__ import annotations

import socket
from datetime import datetime

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from jobsched.client import ApiClient, ApiError, build_client, region_from_host
from tests.cli.conftest import TOKEN, ContractServer, job_body

FAKE_KEY_ID = "AKIAIOSFODNN7EXAMPLE"
FAKE_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


@pytest.fixture
def fake_aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """Fixed fake credentials through the standard chain's first link: environment variables."""
    unset = ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_REGION", "AWS_DEFAULT_REGION")
    for name in unset:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", FAKE_KEY_ID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", FAKE_SECRET)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))


def test_bearer_token_is_sent_in_the_authorization_header(api: ContractServer) -> None:
    # Given a client with a token
    api.respond("GET", "/jobs/job-0001", 200, job_body())
    client = ApiClient(api.url, token=TOKEN)
    # When it gets a job
    job = client.get_job("job-0001")
    # Then the request carried the bearer token and the decoded job came back
    assert api.only("GET", "/jobs/job-0001").headers["authorization"] == f"Bearer {TOKEN}"
    assert job["id"] == "job-0001"


def test_url_and_token_default_from_the_environment() -> None:
    # Given JOBSCHED_URL and JOBSCHED_TOKEN
    env = {"JOBSCHED_URL": "http://127.0.0.1:9999/", "JOBSCHED_TOKEN": "from-env"}
    # When a client is built without arguments
    client = build_client(environ=env)
    # Then it uses both (trailing slash dropped)
    assert (client.base_url, client.token, client.signer) == ("http://127.0.0.1:9999", "from-env", None)


def test_explicit_arguments_win_over_the_environment() -> None:
    env = {"JOBSCHED_URL": "http://127.0.0.1:9999", "JOBSCHED_TOKEN": "from-env"}
    client = build_client("http://localhost:8080", token="from-flag", environ=env)
    assert (client.base_url, client.token) == ("http://localhost:8080", "from-flag")


def test_default_url_is_the_embedded_mode() -> None:
    assert build_client(environ={}).base_url == "http://127.0.0.1:8080"


def test_a_url_that_is_not_http_is_rejected_before_any_request() -> None:
    with pytest.raises(ApiError) as raised:
        build_client("127.0.0.1:8080", environ={})
    assert raised.value.code == "bad_url"


def test_query_parameters_are_encoded_and_none_values_left_out(api: ContractServer) -> None:
    api.respond("GET", "/runs", 200, {"items": [], "next_cursor": None})
    ApiClient(api.url).list_runs(limit=10, cursor=None, job_id="job 1/a", state="failed")
    request = api.only("GET", "/runs")
    assert request.query == {"limit": ["10"], "job_id": ["job 1/a"], "state": ["failed"]}


def test_post_sends_json_with_content_type_and_idempotency_key(api: ContractServer) -> None:
    api.respond("POST", "/jobs", 201, job_body())
    ApiClient(api.url).create_job({"name": "hello", "schedule": "@hourly"}, idempotency_key="k-1")
    request = api.only("POST", "/jobs")
    assert request.json() == {"name": "hello", "schedule": "@hourly"}
    assert request.headers["content-type"] == "application/json"
    assert request.headers["idempotency-key"] == "k-1"


def test_delete_sends_the_version_in_if_match(api: ContractServer) -> None:
    api.respond("DELETE", "/jobs/job-0001", 204, None)
    result = ApiClient(api.url).delete_job("job-0001", version=7)
    assert api.only("DELETE", "/jobs/job-0001").headers["if-match"] == "7"
    assert result is None


def test_path_segments_are_percent_encoded(api: ContractServer) -> None:
    with pytest.raises(ApiError):
        ApiClient(api.url).get_run("a/b?c")
    assert api.requests[-1].raw_target == "/runs/a%2Fb%3Fc"


def test_an_api_error_body_becomes_an_api_error_with_status_code_and_message(api: ContractServer) -> None:
    api.respond("PATCH", "/jobs/job-0001", 412, {"error": "precondition_failed", "message": "version is 3"})
    with pytest.raises(ApiError) as raised:
        ApiClient(api.url).update_job("job-0001", {"name": "x"}, version=2)
    assert (raised.value.status, raised.value.code, raised.value.message) == (
        412,
        "precondition_failed",
        "version is 3",
    )


def test_a_non_api_error_body_is_kept_as_the_message(api: ContractServer) -> None:
    api.respond("GET", "/jobs", 502, b"<html>Bad Gateway</html>")
    with pytest.raises(ApiError) as raised:
        ApiClient(api.url).list_jobs()
    assert (raised.value.status, raised.value.code) == (502, "http_502")
    assert "Bad Gateway" in raised.value.message


def test_an_unreachable_server_is_a_connection_error() -> None:
    # Given a port nobody listens on
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    # When a request is sent there, Then it fails as connection_error with status 0
    with pytest.raises(ApiError) as raised:
        ApiClient(f"http://127.0.0.1:{port}", timeout=2).health()
    assert (raised.value.status, raised.value.code) == (0, "connection_error")


def test_list_all_follows_next_cursor_until_it_is_null(api: ContractServer) -> None:
    # Given three pages
    api.respond("GET", "/jobs", 200, {"items": [{"id": "c"}, {"id": "b"}], "next_cursor": "p2"})
    api.respond("GET", "/jobs", 200, {"items": [{"id": "a"}], "next_cursor": "p3"})
    api.respond("GET", "/jobs", 200, {"items": [], "next_cursor": None})
    # When every item is listed
    items = ApiClient(api.url).list_all("/jobs", {"limit": 2})
    # Then the items are concatenated in order and each page asked for the previous cursor
    assert [i["id"] for i in items] == ["c", "b", "a"]
    assert [r.query.get("cursor") for r in api.requests] == [None, ["p2"], ["p3"]]
    assert all(r.query["limit"] == ["2"] for r in api.requests)


@pytest.mark.parametrize(
    ("host", "region"),
    [
        ("abc123.execute-api.eu-west-1.amazonaws.com", "eu-west-1"),
        ("ABC123.execute-api.us-gov-west-1.amazonaws.com", "us-gov-west-1"),
        ("x1.execute-api.cn-north-1.amazonaws.com.cn", "cn-north-1"),
        ("api.example.com", None),
        ("127.0.0.1", None),
    ],
)
def test_region_is_read_from_execute_api_host_names(host: str, region: str | None) -> None:
    assert region_from_host(host) == region


def test_sigv4_is_chosen_automatically_for_execute_api_urls(fake_aws_env: None) -> None:
    client = build_client("https://abc123.execute-api.eu-west-1.amazonaws.com", token="ignored")
    assert client.signer is not None and client.signer.region == "eu-west-1"
    assert client.token is None


def test_sigv4_without_any_region_is_a_usage_error(fake_aws_env: None) -> None:
    with pytest.raises(ApiError) as raised:
        build_client("https://api.example.com", sigv4=True)
    assert raised.value.code == "no_region"


def _verify_signature(request, region: str, session_token: str | None = None) -> None:
    """Recompute the SigV4 signature from what the server received and compare."""
    auth = request.headers["authorization"]
    amz_date = request.headers["x-amz-date"]
    signed = auth.split("SignedHeaders=")[1].split(",")[0].split(";")
    headers = {name: request.headers[name] for name in signed if name != "host"}
    url = "http://" + request.headers["host"] + request.raw_target
    aws_request = AWSRequest(method=request.method, url=url, data=request.body, headers=headers)
    aws_request.context["timestamp"] = amz_date
    signer = SigV4Auth(Credentials(FAKE_KEY_ID, FAKE_SECRET, session_token), "execute-api", region)
    canonical = signer.canonical_request(aws_request)
    expected = signer.signature(signer.string_to_sign(aws_request, canonical), aws_request)
    assert auth.endswith(f"Signature={expected}")


def test_sigv4_signs_with_credentials_from_the_environment(api: ContractServer, fake_aws_env: None) -> None:
    # Given a SigV4 client against the local server, credentials from the standard chain (env)
    api.respond("POST", "/jobs", 201, job_body())
    client = build_client(api.url, sigv4=True, region="eu-west-1", token="not-sent")
    # When it creates a job with a query string and a body
    client.request("POST", "/jobs", query={"dry": "false"}, body={"name": "hello"})
    # Then the Authorization header is a well-formed SigV4 header for execute-api in that region
    request = api.only("POST", "/jobs")
    auth = request.headers["authorization"]
    date = datetime.strptime(request.headers["x-amz-date"], "%Y%m%dT%H%M%SZ").strftime("%Y%m%d")
    scope = f"{FAKE_KEY_ID}/{date}/eu-west-1/execute-api/aws4_request"
    assert auth.startswith(f"AWS4-HMAC-SHA256 Credential={scope}, ")
    assert "host" in auth.split("SignedHeaders=")[1].split(",")[0].split(";")
    assert "x-amz-security-token" not in request.headers
    assert not auth.startswith("Bearer")
    # And the signature is the one SigV4 defines for exactly this request
    _verify_signature(request, "eu-west-1")


def test_sigv4_sends_the_session_token_of_temporary_credentials(
    api: ContractServer, fake_aws_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_SESSION_TOKEN", "FwoGZXIvYXdzEXAMPLETOKEN")
    api.respond("GET", "/runs", 200, {"items": [], "next_cursor": None})
    build_client(api.url, sigv4=True, region="us-east-1").list_runs(limit=5)
    request = api.only("GET", "/runs")
    assert request.headers["x-amz-security-token"] == "FwoGZXIvYXdzEXAMPLETOKEN"
    assert "x-amz-security-token" in request.headers["authorization"]
    _verify_signature(request, "us-east-1", "FwoGZXIvYXdzEXAMPLETOKEN")


def test_sigv4_without_credentials_says_how_to_provide_them(
    api: ContractServer, fake_aws_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.delenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", raising=False)
    monkeypatch.delenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", raising=False)
    client = build_client(api.url, sigv4=True, region="us-east-1")
    with pytest.raises(ApiError) as raised:
        client.health()
    assert raised.value.code == "no_credentials"
    assert api.requests == []


def test_the_former_module_name_still_imports_the_same_client() -> None:
    # Given scripts written against the client's name before it had a package of its own (docs/cli.md)
    import jobsched.cli.client as former
    import jobsched.client as client

    # Then every public name there is the client package's own object
    assert former.__all__ == client.__all__
    assert all(getattr(former, name) is getattr(client, name) for name in client.__all__)
