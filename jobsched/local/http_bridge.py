"""HTTP in front of the api function, shaped like API Gateway HTTP API (payload format 2.0).

Each request becomes a version 2.0 event (``routeKey`` ``$default``, lower-cased headers, cookies
split out, comma-joined repeated query parameters, base64 for binary bodies), the handler is invoked
with a Lambda context, and its result is turned back into an HTTP response following API Gateway's
rules: a dict with ``statusCode`` is used as is (``cookies`` become ``Set-Cookie`` headers, a base64
body is decoded); anything else is sent as a 200 JSON body. The bridge serves nothing by itself.

A client that hangs up before its response is written (a killed ``curl``, a closed tab, a test's
client timing out) is normal: it is logged as one debug line, never a traceback.
"""

from __future__ import annotations

import base64
import json
import logging
import threading
import uuid
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from jobsched.local.invoke import Function

log = logging.getLogger(__name__)

#: What reading or writing a socket raises when the other end has gone away.
CLIENT_GONE = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError)

TEXT_TYPES = ("text/", "application/json", "application/xml", "application/javascript", "+json", "+xml")
FORM_TYPE = "application/x-www-form-urlencoded"


def build_event(
    *,
    method: str,
    target: str,
    headers: list[tuple[str, str]],
    body: bytes,
    source_ip: str,
    now: datetime,
    request_id: str,
) -> dict[str, Any]:
    """The API Gateway HTTP API v2 event for one request (``target`` is the raw request target)."""
    parts = urlsplit(target)
    lowered: dict[str, str] = {}
    cookies: list[str] = []
    for name, value in headers:
        key = name.lower()
        if key == "cookie":
            cookies.extend(c.strip() for c in value.split(";") if c.strip())
            continue
        lowered[key] = f"{lowered[key]},{value}" if key in lowered else value
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": parts.path or "/",
        "rawQueryString": parts.query,
        "headers": lowered,
        "requestContext": {
            "accountId": "123456789012",
            "apiId": "local",
            "domainName": lowered.get("host", "127.0.0.1"),
            "domainPrefix": lowered.get("host", "127.0.0.1").split(".")[0],
            "http": {
                "method": method,
                "path": parts.path or "/",
                "protocol": "HTTP/1.1",
                "sourceIp": source_ip,
                "userAgent": lowered.get("user-agent", ""),
            },
            "requestId": request_id,
            "routeKey": "$default",
            "stage": "$default",
            "time": now.strftime("%d/%b/%Y:%H:%M:%S +0000"),
            "timeEpoch": int(now.timestamp() * 1000),
        },
        "isBase64Encoded": False,
    }
    if cookies:
        event["cookies"] = cookies
    if parts.query:
        params: dict[str, str] = {}
        for key, value in parse_qsl(parts.query, keep_blank_values=True):
            params[key] = f"{params[key]},{value}" if key in params else value
        event["queryStringParameters"] = params
    if body:
        if _is_text(lowered.get("content-type", "")):
            try:
                event["body"] = body.decode("utf-8")
            except UnicodeDecodeError:
                event["body"], event["isBase64Encoded"] = base64.b64encode(body).decode(), True
        else:
            event["body"], event["isBase64Encoded"] = base64.b64encode(body).decode(), True
    return event


def _is_text(content_type: str) -> bool:
    content_type = content_type.lower()
    return (
        not content_type or content_type.startswith(FORM_TYPE) or any(t in content_type for t in TEXT_TYPES)
    )


def build_response(result: Any) -> tuple[int, list[tuple[str, str]], bytes]:
    """(status, headers, body) for a handler's result, by API Gateway's payload format 2.0 rules."""
    if isinstance(result, dict) and "statusCode" in result:
        status = int(result["statusCode"])
        headers = [(str(k), str(v)) for k, v in (result.get("headers") or {}).items()]
        headers += [("Set-Cookie", str(c)) for c in result.get("cookies") or ()]
        raw = result.get("body")
        if raw is None:
            body = b""
        elif result.get("isBase64Encoded"):
            body = base64.b64decode(raw)
        else:
            body = raw.encode("utf-8") if isinstance(raw, str) else json.dumps(raw).encode()
        return status, headers, body
    body = (result if isinstance(result, str) else json.dumps(result)).encode("utf-8")
    return 200, [("Content-Type", "application/json")], body


class _Handler(BaseHTTPRequestHandler):
    server: _BridgeServer
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        event = build_event(
            method=self.command,
            target=self.path,
            headers=list(self.headers.items()),
            body=body,
            source_ip=self.client_address[0],
            now=datetime.now(UTC),
            request_id=str(uuid.uuid4()),
        )
        try:
            function = self.server.function
            assert function is not None  # start() refuses to serve without one
            status, headers, payload = build_response(function.invoke(event))
        except Exception:
            log.exception("api function raised on %s %s", self.command, self.path)
            status, headers = 500, [("Content-Type", "application/json")]
            payload = b'{"message":"Internal Server Error"}'
        self.send_response(status)
        for name, value in headers:
            if name.lower() not in ("content-length", "connection", "transfer-encoding"):
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = do_HEAD = _handle

    def __getattr__(self, name: str) -> Any:
        """Every other method (TRACE, CONNECT, any token) goes to the api function too, as API Gateway's
        ``ANY`` route would send it: the function answers 405 with ``Allow`` for a path it routes, 404
        otherwise. (``http.server`` would answer 501 itself for a method without a ``do_`` handler.)"""
        if name.startswith("do_") and name[3:].isupper():
            return self._handle
        raise AttributeError(name)

    def handle(self) -> None:
        """Serve the connection's requests; a client that went away ends it with one debug line
        (``socketserver`` would print a traceback and "Exception occurred during processing")."""
        try:
            super().handle()
        except CLIENT_GONE as exc:
            self.close_connection = True
            request = getattr(self, "requestline", "") or "before its request line"
            gone = type(exc).__name__
            log.debug("client %s went away (%s) during %s", self.address_string(), gone, request)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s - %s", self.address_string(), format % args)


class _BridgeServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], function: Function | None):
        super().__init__(address, _Handler)
        self.function = function


class HttpBridge:
    """An HTTP server on ``host:port`` whose every request invokes ``function`` (the api function)."""

    def __init__(self, function: Function | None, *, host: str = "127.0.0.1", port: int = 8080):
        # Binds at once, so a busy port fails before anything else is started.
        self._server = _BridgeServer((host, port), function)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self, function: Function | None = None) -> None:
        """Serve requests with ``function`` (or the one given at construction) on a thread."""
        if function is not None:
            self._server.function = function
        if self._server.function is None:
            raise ValueError("the HTTP bridge needs a function to invoke")
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.1}, name="http-bridge", daemon=True
        )
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop accepting requests, close the socket and wait for the serving thread."""
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(timeout)
            self._thread = None
        self._server.server_close()
