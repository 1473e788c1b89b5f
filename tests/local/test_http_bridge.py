"""HTTP bridge: a request becomes an API Gateway HTTP API v2 event, the result becomes a response."""

from __future__ import annotations

import base64
import json
import logging
import socket
import struct
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from jobsched.local.http_bridge import HttpBridge, build_event, build_response
from jobsched.local.invoke import Function, function_spec
from tests.local.conftest import Machinery, wait_for

NOW = datetime(2026, 11, 29, 20, 45, 41, tzinfo=UTC)


class EchoApi:
    """Answers each event with what the bridge sent, plus a cookie and a custom status."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def __call__(self, event: dict[str, Any], context: Any) -> Any:
        self.events.append(event)
        path = event["rawPath"]
        if path == "/boom":
            raise RuntimeError("api failed")
        if path == "/plain":
            return {"hello": "world"}
        if path == "/big":  # larger than any socket buffer: the write is still going when a client hangs up
            return {"statusCode": 200, "body": "x" * (16 * 1024 * 1024)}
        if path == "/binary":
            return {
                "statusCode": 200,
                "body": base64.b64encode(b"\x00\x01").decode(),
                "isBase64Encoded": True,
            }
        return {
            "statusCode": 201,
            "headers": {
                "Content-Type": "application/json",
                "X-Request": event["requestContext"]["requestId"],
            },
            "cookies": ["session=abc; Path=/", "theme=dark"],
            "body": json.dumps({"method": event["requestContext"]["http"]["method"]}),
        }


@pytest.fixture(scope="module")
def bridge() -> Iterator[tuple[HttpBridge, EchoApi]]:
    api = EchoApi()
    server = HttpBridge(Function(function_spec("api"), api), port=0)
    server.start()
    try:
        yield server, api
    finally:
        server.stop()


def call(url: str, method: str = "GET", body: bytes | None = None, headers: dict | None = None) -> Any:
    request = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        return urllib.request.urlopen(request, timeout=5)
    except urllib.error.HTTPError as error:
        return error


def test_a_request_becomes_a_v2_event(bridge: tuple[HttpBridge, EchoApi]) -> None:
    server, api = bridge
    # When a POST with a query, headers, a cookie and a JSON body arrives
    call(
        f"{server.url}/jobs/j1?limit=5&tag=a&tag=b",
        "POST",
        b'{"name": "x"}',
        {"Content-Type": "application/json", "Authorization": "Bearer t", "Cookie": "a=1; b=2"},
    ).read()
    # Then the api function got an HTTP API payload 2.0 event
    event = api.events[-1]
    assert event["version"] == "2.0"
    assert event["routeKey"] == "$default"
    assert event["rawPath"] == "/jobs/j1"
    assert event["rawQueryString"] == "limit=5&tag=a&tag=b"
    assert event["queryStringParameters"] == {"limit": "5", "tag": "a,b"}
    assert event["headers"]["authorization"] == "Bearer t"
    assert event["headers"]["content-type"] == "application/json"
    assert "cookie" not in event["headers"]
    assert event["cookies"] == ["a=1", "b=2"]
    assert event["requestContext"]["http"]["method"] == "POST"
    assert event["requestContext"]["http"]["path"] == "/jobs/j1"
    assert event["requestContext"]["http"]["sourceIp"] == "127.0.0.1"
    assert event["body"] == '{"name": "x"}'
    assert event["isBase64Encoded"] is False


def test_the_handler_result_becomes_the_response(bridge: tuple[HttpBridge, EchoApi]) -> None:
    server, api = bridge
    # When the function answers 201 with headers and cookies
    response = call(f"{server.url}/anything", "DELETE")
    # Then status, headers, Set-Cookie and body are passed through
    assert response.status == 201
    assert response.headers["X-Request"] == api.events[-1]["requestContext"]["requestId"]
    assert response.headers.get_all("Set-Cookie") == ["session=abc; Path=/", "theme=dark"]
    assert json.loads(response.read()) == {"method": "DELETE"}


def test_a_result_without_status_code_is_sent_as_200_json(bridge: tuple[HttpBridge, EchoApi]) -> None:
    server, _ = bridge
    response = call(f"{server.url}/plain")
    assert response.status == 200
    assert response.headers["Content-Type"] == "application/json"
    assert json.loads(response.read()) == {"hello": "world"}


def test_a_base64_result_body_is_decoded(bridge: tuple[HttpBridge, EchoApi]) -> None:
    server, _ = bridge
    assert call(f"{server.url}/binary").read() == b"\x00\x01"


def test_a_handler_that_raises_answers_500(bridge: tuple[HttpBridge, EchoApi]) -> None:
    server, _ = bridge
    response = call(f"{server.url}/boom")
    assert response.status == 500
    assert json.loads(response.read()) == {"message": "Internal Server Error"}


def test_a_client_hanging_up_mid_response_is_one_debug_line_not_a_traceback(
    bridge: tuple[HttpBridge, EchoApi], caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    server, _ = bridge
    caplog.set_level(logging.DEBUG, logger="jobsched.local.http_bridge")
    host, port = server.url.removeprefix("http://").split(":")
    # Given a client that asked for a large response and has started reading it
    client = socket.create_connection((host, int(port)), timeout=5)
    client.sendall(b"GET /big HTTP/1.1\r\nHost: local\r\n\r\n")
    assert client.recv(1024).startswith(b"HTTP/1.1 200")
    # When it goes away (a reset, as a killed curl or a closed browser tab does)
    client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    client.close()
    # Then the bridge logs one line at debug and prints no traceback
    lines = wait_for(lambda: [r for r in caplog.records if "went away" in r.getMessage()])
    assert len(lines) == 1 and lines[0].levelno == logging.DEBUG and lines[0].exc_info is None
    assert "GET /big" in lines[0].getMessage()
    err = capfd.readouterr().err
    assert "Traceback" not in err and "Exception occurred during processing of request" not in err
    # And it goes on serving
    assert call(f"{server.url}/plain").status == 200


def test_a_binary_request_body_is_base64_encoded() -> None:
    # Given an octet-stream body
    event = build_event(
        method="PUT",
        target="/blob",
        headers=[("Content-Type", "application/octet-stream")],
        body=b"\xff\x00",
        source_ip="127.0.0.1",
        now=NOW,
        request_id="r1",
    )
    # Then it travels base64-encoded, as API Gateway sends it
    assert event["isBase64Encoded"] is True
    assert base64.b64decode(event["body"]) == b"\xff\x00"
    assert event["requestContext"]["timeEpoch"] == int(NOW.timestamp() * 1000)
    assert "queryStringParameters" not in event
    assert "body" not in build_event(
        method="GET", target="/", headers=[], body=b"", source_ip="::1", now=NOW, request_id="r2"
    )


def test_repeated_headers_are_comma_joined() -> None:
    event = build_event(
        method="GET",
        target="/",
        headers=[("X-Tag", "a"), ("x-tag", "b")],
        body=b"",
        source_ip="127.0.0.1",
        now=NOW,
        request_id="r",
    )
    assert event["headers"]["x-tag"] == "a,b"


def test_a_string_result_is_the_json_body() -> None:
    status, _headers, body = build_response("ok")
    assert (status, body) == (200, b"ok")


def test_the_embedded_mode_serves_the_api_function_over_http(machinery: Machinery) -> None:
    # Given the embedded mode with a recording api function
    api = machinery.handlers["api"]
    # When a request arrives on the API port
    call(f"{machinery.mode.api_url}/health?x=1", headers={"Authorization": "Bearer tok-acme"}).read()
    # Then the api function received it as a v2 event
    event = wait_for(lambda: [e for e in api.events if e.get("rawPath") == "/health"])[0]
    assert event["headers"]["authorization"] == "Bearer tok-acme"
    assert event["queryStringParameters"] == {"x": "1"}


def test_a_kept_alive_connection_gets_each_answer_without_a_delayed_ack_wait(
    bridge: tuple[HttpBridge, EchoApi],
) -> None:
    """Given a client that keeps its connection open (requests, botocore, schemathesis do)
    When it sends 20 requests one after the other
    Then each answer arrives at once: the headers and the body, written separately, are not held
    back by Nagle's algorithm until the client's delayed ACK (40 ms a request on Linux)."""
    import http.client
    import time

    server, _ = bridge
    host, port = server.url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=5)
    try:
        started = time.monotonic()
        for _ in range(20):
            connection.request("GET", "/plain")
            response = connection.getresponse()
            assert response.status == 200 and response.read() == b'{"hello": "world"}'
        elapsed = time.monotonic() - started
    finally:
        connection.close()
    assert elapsed < 0.5, f"20 kept-alive requests took {elapsed:.2f} s"
