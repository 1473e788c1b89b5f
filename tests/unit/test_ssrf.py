"""The SSRF guard and webhook calls, against a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from jobsched.core.errors import PermanentError, RetryableError, TimeoutExceeded
from jobsched.targets.ssrf import BlockedAddressError, forbidden_reason, parse_allowed_hosts, resolve_checked
from jobsched.targets.webhook import WebhookTarget, call_webhook

ENVELOPE = {"run_id": "r1", "payload": {"x": 1}}


class _Recorder(BaseHTTPRequestHandler):
    requests: list[dict] = []

    def log_message(self, *args):  # keep the test output clean
        pass

    def handle(self):
        # The /slow test's client gives up before the answer is written: a hang-up is expected there,
        # not a traceback in the test output.
        try:
            super().handle()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _handle(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode() if length else ""
        record = {"method": self.command, "path": self.path, "headers": dict(self.headers), "body": body}
        self.requests.append(record)
        routes = {
            "/ok": (200, b'{"fine": true}'),
            "/text": (200, b"plain words"),
            "/busy": (503, b"later"),
            "/limit": (429, b"slow down"),
            "/bad": (400, b"bad field"),
            "/redirect": (302, b""),
        }
        if self.path == "/slow":
            time.sleep(0.5)
            status, payload = 200, b"{}"
        else:
            status, payload = routes.get(self.path, (404, b"nope"))
        self.send_response(status)
        if status == 302:
            self.send_header("Location", "/ok")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = do_PUT = _handle


@pytest.fixture
def server():
    _Recorder.requests = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    yield httpd.server_address[1], _Recorder.requests
    httpd.shutdown()
    httpd.server_close()


def call(url: str, allowed=("127.0.0.1",), **kwargs):
    target = WebhookTarget.from_dict({"url": url, **kwargs.pop("target", {})})
    return call_webhook(target, run_id="r1", attempt=2, envelope=ENVELOPE, allowed_hosts=allowed, **kwargs)


def fake_resolver(mapping: dict[str, list[str]]):
    def resolve(host, port, type=0):
        if host not in mapping:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port)) for a in mapping[host]]

    return resolve


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("127.0.0.1", "loopback"),
        ("::1", "loopback"),
        ("10.1.2.3", "private"),
        ("192.168.0.10", "private"),
        ("172.16.5.5", "private"),
        ("169.254.169.254", "metadata"),
        ("fd00:ec2::254", "metadata"),
        ("169.254.10.10", "link-local"),
        ("fe80::1", "link-local"),
        ("224.0.0.1", "multicast"),
        ("0.0.0.0", "unspecified"),
        ("240.0.0.1", "reserved"),
        ("100.64.0.1", "not globally routable"),
        ("::ffff:127.0.0.1", "loopback"),
    ],
)
def test_forbidden_addresses_are_named(address, reason):
    assert reason in (forbidden_reason(address) or "")


@pytest.mark.parametrize("address", ["93.184.215.14", "2606:4700::1111", "8.8.8.8"])
def test_public_addresses_are_allowed(address):
    assert forbidden_reason(address) is None


def test_loopback_webhook_is_refused_and_never_contacted(server):
    # Given a server on 127.0.0.1 and no allow-list
    port, requests = server
    # When a webhook targets it
    with pytest.raises(BlockedAddressError) as err:
        call(f"http://127.0.0.1:{port}/ok", allowed=())
    # Then it is refused permanently and no request reached the server
    assert isinstance(err.value, PermanentError) and "loopback" in err.value.message
    assert requests == []


def test_allowed_host_is_called_with_idempotency_key(server):
    # Given 127.0.0.1 on the allow-list
    port, requests = server
    # When the webhook is called
    out = call(f"http://127.0.0.1:{port}/ok")
    # Then it succeeds with the parsed body, and the request carries the run id as idempotency key
    assert out == {"status": 200, "body": {"fine": True}}
    headers = requests[0]["headers"]
    assert headers["Idempotency-Key"] == "r1" and headers["X-Jobsched-Attempt"] == "2"
    assert json.loads(requests[0]["body"]) == ENVELOPE


def test_allow_list_is_by_name_only(server):
    # Given "localhost" allowed but the URL uses 127.0.0.1 directly
    port, _ = server
    with pytest.raises(BlockedAddressError):
        call(f"http://127.0.0.1:{port}/ok", allowed=parse_allowed_hosts("localhost"))


def test_connection_goes_to_the_checked_address_with_the_original_host_header(server):
    # Given a name that resolves (once) to 127.0.0.1 and is allowed by name
    port, requests = server
    resolver = fake_resolver({"hooks.example": ["127.0.0.1"]})
    # When it is called
    call(f"http://hooks.example:{port}/ok", allowed=("hooks.example",), resolver=resolver)
    # Then the request reached our server, addressed to the original name
    assert requests[0]["headers"]["Host"] == f"hooks.example:{port}"


def test_name_resolving_to_a_private_address_is_refused():
    resolver = fake_resolver({"internal.example": ["10.0.0.7"]})
    with pytest.raises(BlockedAddressError, match="private"):
        resolve_checked("internal.example", 443, (), resolver=resolver)


def test_name_with_one_public_and_one_private_address_is_refused():
    resolver = fake_resolver({"mixed.example": ["93.184.215.14", "169.254.169.254"]})
    with pytest.raises(BlockedAddressError, match="metadata"):
        resolve_checked("mixed.example", 443, (), resolver=resolver)


def test_unresolvable_name_is_retryable():
    with pytest.raises(RetryableError):
        resolve_checked("nowhere.example", 443, (), resolver=fake_resolver({}))


def test_custom_body_and_method_are_sent_verbatim(server):
    port, requests = server
    call(f"http://127.0.0.1:{port}/ok", target={"method": "PUT", "body": "hello", "headers": {"X-A": "b"}})
    assert requests[0]["method"] == "PUT" and requests[0]["body"] == "hello"
    assert requests[0]["headers"]["X-A"] == "b"


def test_non_json_success_body_is_returned_as_text(server):
    port, _ = server
    assert call(f"http://127.0.0.1:{port}/text")["body"] == "plain words"


@pytest.mark.parametrize("path", ["/busy", "/limit"])
def test_5xx_and_429_are_retryable(server, path):
    port, _ = server
    with pytest.raises(RetryableError):
        call(f"http://127.0.0.1:{port}{path}")


def test_other_4xx_is_permanent(server):
    port, _ = server
    with pytest.raises(PermanentError, match="400"):
        call(f"http://127.0.0.1:{port}/bad")


def test_redirects_are_not_followed(server):
    # When the server answers 302
    port, requests = server
    with pytest.raises(PermanentError, match="302"):
        call(f"http://127.0.0.1:{port}/redirect")
    # Then the Location was not requested
    assert [r["path"] for r in requests] == ["/redirect"]


def test_slow_server_times_out_as_retryable(server):
    port, _ = server
    with pytest.raises(TimeoutExceeded):
        call(f"http://127.0.0.1:{port}/slow", timeout_seconds=0.1)


def test_connection_refused_is_retryable():
    # Given a port nothing listens on
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    with pytest.raises(RetryableError):
        call(f"http://127.0.0.1:{port}/ok")


@pytest.mark.parametrize(
    "spec",
    [
        {"url": "ftp://x.example/"},
        {"url": "http://u:p@x.example/"},
        {"url": "https://x.example/", "method": "TRACE"},
        {"url": "https://x.example/", "timeout_seconds": 0},
        {"url": "https://x.example/", "headers": {"a": 1}},
    ],
)
def test_malformed_webhook_targets_are_rejected(spec):
    from jobsched.core.errors import ValidationError

    with pytest.raises(ValidationError):
        WebhookTarget.from_dict(spec)
