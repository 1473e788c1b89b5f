"""Fixtures for the CLI tests: a real HTTP server on 127.0.0.1 serving contract-shaped responses.

The server is `http.server.ThreadingHTTPServer`; it answers each ``(method, path)`` with the responses
a test queued (the last one repeats) and records every request (method, path, query, headers, body),
so the tests exercise the real HTTP client: headers, signing, paging, error handling.
"""

from __future__ import annotations

import json
import threading
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from jobsched.cli import main

TOKEN = "test-token-123"


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]  # lower-cased names
    raw_target: str
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


@dataclass
class ContractServer:
    """Canned responses per (method, path); a request without one answers 404 not_found."""

    url: str = ""
    requests: list[Recorded] = field(default_factory=list)
    routes: dict[tuple[str, str], list[tuple[int, Any]]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def respond(self, method: str, path: str, status: int, body: Any = None) -> None:
        """Queue a response; once the queue is down to one, that one answers every later request."""
        self.routes.setdefault((method, path), []).append((status, body))

    def next_response(self, method: str, path: str) -> tuple[int, Any]:
        with self.lock:
            queue = self.routes.get((method, path))
            if not queue:
                return 404, {"error": "not_found", "message": f"no route {method} {path}"}
            return queue.pop(0) if len(queue) > 1 else queue[0]

    def only(self, method: str, path: str) -> Recorded:
        """The one recorded request to (method, path); fails when there were none or several."""
        matching = [r for r in self.requests if r.method == method and r.path == path]
        assert len(matching) == 1, f"{method} {path}: {len(matching)} requests, all: {self.summary()}"
        return matching[0]

    def summary(self) -> list[str]:
        return [f"{r.method} {r.raw_target}" for r in self.requests]


def _handler_for(server: ContractServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            split = urllib.parse.urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            server.requests.append(
                Recorded(
                    method=self.command,
                    path=urllib.parse.unquote(split.path),
                    query=urllib.parse.parse_qs(split.query),
                    headers={k.lower(): v for k, v in self.headers.items()},
                    raw_target=self.path,
                    body=body,
                )
            )
            status, payload = server.next_response(self.command, urllib.parse.unquote(split.path))
            if isinstance(payload, bytes):
                raw = payload
            else:
                raw = b"" if payload is None else json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        do_GET = do_POST = do_PATCH = do_DELETE = do_PUT = _serve

        def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
            pass

    return Handler


@pytest.fixture
def api() -> Iterator[ContractServer]:
    """A running contract server; yields it with its base URL."""
    state = ContractServer()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(state))
    state.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture
def cli_env(api: ContractServer, monkeypatch: pytest.MonkeyPatch) -> ContractServer:
    """The environment a user of the embedded mode has: JOBSCHED_URL and JOBSCHED_TOKEN set."""
    monkeypatch.setenv("JOBSCHED_URL", api.url)
    monkeypatch.setenv("JOBSCHED_TOKEN", TOKEN)
    return api


@dataclass
class Result:
    code: int
    out: str
    err: str


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]):
    """Run `jobsched <argv>` in-process through the real entry point; exit code, stdout, stderr."""

    def run(*argv: str) -> Result:
        capsys.readouterr()
        try:
            code = main(list(argv))
        except SystemExit as exc:  # argparse usage errors
            code = exc.code if isinstance(exc.code, int) else 2
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run


def job_body(**overrides: Any) -> dict:
    """A job as the API returns it (contract-shaped)."""
    job = {
        "id": "job-0001",
        "name": "hello",
        "schedule": "* * * * *",
        "timezone": "UTC",
        "target": {"handler": "demo.echo"},
        "payload": {"message": "hi"},
        "priority": "default",
        "timeout_seconds": 60,
        "retry": {"max_attempts": 3, "base_seconds": 1, "max_seconds": 60},
        "misfire_policy": "run_once",
        "misfire_grace_seconds": 60,
        "max_catchup": 100,
        "overlap_policy": "allow",
        "dst_gap": "shift",
        "dst_overlap": "first",
        "jitter_seconds": 0,
        "state": "active",
        "version": 1,
        "next_fire_times": [f"2026-12-01T09:0{i}:00Z" for i in range(5)],
    }
    job.update(overrides)
    return job


def run_body(**overrides: Any) -> dict:
    """A run as the API returns it (contract-shaped)."""
    run = {
        "id": "job-0001.20261201T090000Z",
        "job_id": "job-0001",
        "state": "succeeded",
        "scheduled_at": "2026-12-01T09:00:00Z",
        "started_at": "2026-12-01T09:00:00.120Z",
        "finished_at": "2026-12-01T09:00:00.480Z",
        "attempt": 1,
        "attempts": [
            {
                "attempt": 1,
                "started_at": "2026-12-01T09:00:00.120Z",
                "finished_at": "2026-12-01T09:00:00.480Z",
                "outcome": "succeeded",
                "error": None,
            }
        ],
        "output": {"message": "hi"},
        "error": None,
        "skip_reason": None,
    }
    run.update(overrides)
    return run
