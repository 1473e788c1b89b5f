"""Keep-alive connections to moto's server: a request no longer costs a TCP connection and a thread.

**Every request was a new connection and a new thread.** moto serves through werkzeug's development
server (``moto.server.main``, :class:`~moto.server.ThreadedMotoServer`), which sends
``Connection: close`` with every answer: http.server cannot skip a request body the application left
unread, so werkzeug never reads a second request from a connection. Every SDK call of the embedded
mode therefore opened a TCP connection, and the server's one accepting thread accepted it and started
a thread for it before the request was read. During a burst (300 runs of 10 s ending within a second:
about 400 DynamoDB requests a second) a quiet tenant's request, written at once by its client and
the first on its connection like every other, reached moto's handler 0.1-0.4 s later (the accept
and the thread's start, behind the burst's), and moto served it in 1-3 ms (measured with the
request's send and moto's entry timed on both sides, 2026-12-06; docs/performance.md, "Noisy
neighbour: long runs and the fair share"). SQS and DynamoDB keep connections alive; botocore reuses
them.

The fix reads a request's whole body (its ``Content-Length``) before the application runs, hands the
application that copy, and then leaves the connection open (drops werkzeug's ``Connection: close``,
and keeps werkzeug's drain after the answer from reading into the next request: :class:`KeptStream`):
the next request line follows the body on the connection, so the next request is read as
http.server reads any. Its answers go out without Nagle's delay (``TCP_NODELAY``, http.server's
``disable_nagle_algorithm``): werkzeug writes the headers and the body in two sends, and on a kept
connection the second waited for the client's delayed acknowledgement, 40 ms a request. A request
that announces a chunked body or ``Expect: 100-continue`` (werkzeug answers ``100 Continue`` only
after this point) is served as before, and its connection closed. What moto answers is unchanged
(``tests/local/test_moto_fixes.py``).
"""

from __future__ import annotations

import functools
import io
from typing import Any

_APPLIED = "_jobsched_keepalive"  # on a patched method: this module's patch is in place
_KEEP = "_jobsched_keep_alive"  # on a request handler: this request's body was read whole


class KeptStream:
    """A kept connection's input: everything passes through to ``raw``, except that once a request's
    body was read whole, ``read`` answers ``b""`` until the next request line is read. werkzeug
    drains the connection after each answer (it reads whatever the client still sends, since it
    closes the connection next); on a kept connection that would swallow the next request, or wait
    for the client to close."""

    def __init__(self, raw: Any):
        self.raw = raw
        self.answered = False

    def readline(self, *args: Any) -> bytes:
        self.answered = False
        line: bytes = self.raw.readline(*args)
        return line

    def read(self, *args: Any) -> bytes:
        if self.answered:
            return b""
        data: bytes = self.raw.read(*args)
        return data

    def __getattr__(self, name: str) -> Any:
        return getattr(self.raw, name)


def apply() -> None:
    """Patch moto's request handler to read each request's body whole and keep its connection open
    (once)."""
    from moto.moto_server.werkzeug_app import MotoRequestHandler

    make_environ = MotoRequestHandler.make_environ
    if getattr(make_environ, _APPLIED, False):
        return
    send_header = MotoRequestHandler.send_header

    @functools.wraps(make_environ)
    def read_whole(self: Any) -> dict[str, Any]:
        environ: dict[str, Any] = make_environ(self)
        setattr(self, _KEEP, False)
        length = str(environ.get("CONTENT_LENGTH") or "0")
        chunked = environ.get("HTTP_TRANSFER_ENCODING", "").lower() == "chunked"
        expects = bool(environ.get("HTTP_EXPECT"))
        if chunked or expects or not length.isdigit() or self.request_version != "HTTP/1.1":
            return environ  # werkzeug's own reading, and the connection closed after
        stream = self.rfile if isinstance(self.rfile, KeptStream) else KeptStream(self.rfile)
        self.rfile = stream
        body = stream.raw.read(int(length)) if int(length) else b""
        environ["wsgi.input"] = io.BytesIO(body)
        whole = len(body) == int(length)  # a short read: the client went away
        setattr(self, _KEEP, whole)
        stream.answered = whole
        return environ

    @functools.wraps(send_header)
    def keep_open(self: Any, keyword: str, value: str) -> None:
        if getattr(self, _KEEP, False) and keyword.lower() == "connection" and value.lower() == "close":
            return  # the body was read whole: the next request follows it on this connection
        send_header(self, keyword, value)

    # An answer is written in two sends (headers, body): on a kept connection Nagle's algorithm held
    # the second until the client's delayed acknowledgement, 40 ms later. http.server's own switch.
    MotoRequestHandler.disable_nagle_algorithm = True
    setattr(read_whole, _APPLIED, True)
    MotoRequestHandler.make_environ = read_whole  # type: ignore[method-assign]
    MotoRequestHandler.send_header = keep_open  # type: ignore[method-assign]
