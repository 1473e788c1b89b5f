"""Fixtures for the CLI tests: a real HTTP server on 127.0.0.1 serving contract-shaped responses.

The server is `http.server.ThreadingHTTPServer`; it answers each ``(method, path)`` with the responses
a test queued (the last one repeats) and records every request (method, path, query, headers, body),
so the tests exercise the real HTTP client: headers, signing, paging, error handling.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import secrets
import subprocess
import sys
import threading
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from jobsched.cli.client import ApiClient, ApiError
from jobsched.cli.main import main
from tests.children import start_reading
from tests.last_user import LastUser

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


# --- the real thing: `jobsched dev` in a subprocess ------------------------------------------------

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Embedded:
    """A running `jobsched dev`: its API URL, its tenants' tokens and what it printed."""

    url: str
    tokens: dict[str, str]
    log: list[str]

    def client(self, tenant: str) -> ApiClient:
        return ApiClient(self.url, token=self.tokens[tenant])


#: The routes the CLI's end-to-end tests drive; their absence is a regression, never a reason to skip.
REQUIRED_ROUTES = ("/jobs", "/runs", "/dead-letters")


def require_modules(names: tuple[str, ...] | list[str]) -> None:
    """Fail (not skip) when a module the end-to-end tests need cannot be imported: these skips once
    let the tests pass while the pipeline was landing, and would now turn a regression into a skip."""
    missing = [name for name in names if importlib.util.find_spec(name) is None]
    assert not missing, f"{', '.join(missing)} not importable: the end-to-end tests cannot run"


def require_routes(document: dict[str, Any]) -> None:
    """Fail (not skip) when the served OpenAPI document lacks a route the CLI tests drive."""
    paths = document.get("paths", {})
    missing = [path for path in REQUIRED_ROUTES if path not in paths]
    assert not missing, f"the API serves no {', '.join(missing)} route: a regression, not a skip"


#: The session's `jobsched dev` while it runs, stopped after the last test that uses it.
_SESSION_DEV: list[LastUser] = []


@pytest.fixture(scope="session")
def embedded(request: pytest.FixtureRequest) -> Iterator[Embedded]:
    """`jobsched dev` (what `make run` runs) on a free port, no demo jobs, three tenants: ``qs`` for
    the quickstart, ``alpha`` and ``beta`` for the other tests. Started once per session, and stopped
    as soon as the last test of the session that uses it is torn down (:func:`pytest_runtest_teardown`):
    its tests are one xdist group, so they run one after the other on one worker, which has other
    tests to run after them (idle, the process and its emulators took about 4 % of a core for the
    rest of the run; decision 0044, fourteenth pass)."""
    require_modules(["functions.api"])
    tokens = {name: f"{name}-{secrets.token_urlsafe(12)}" for name in ("qs", "alpha", "beta")}
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JOBSCHED_", "AWS_"))}
    argv = [sys.executable, "-m", "jobsched.cli", "dev", "--port", "0", "--no-demo"]
    for name, token in tokens.items():
        argv += ["--tenant", f"{name}={token}"]
    proc = start_reading(argv, env=env, cwd=ROOT)
    log: list[str] = []
    try:
        url = _wait_for_banner(proc, log, timeout=90)
        # Keep reading its output (run events) so a full pipe never blocks it.
        threading.Thread(target=lambda: log.extend(iter(proc.stdout.readline, "")), daemon=True).start()
        _wait_for_health(url, timeout=30)
        require_routes(ApiClient(url).request("GET", "/openapi.json"))
        users = [item.nodeid for item in request.session.items if _uses_session_dev(item)]
        _SESSION_DEV.append(LastUser(users, lambda: _stop(proc)))
        yield Embedded(url, tokens, log)
    finally:
        _SESSION_DEV.clear()
        _stop(proc)


def _stop(proc: subprocess.Popen) -> None:
    """End `jobsched dev` (its graceful stop, killed after 20 s); a second call finds it ended."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _uses_session_dev(item: pytest.Item) -> bool:
    """``item`` uses this file's :func:`embedded` (a test under tests/cli asking for it by name)."""
    return "embedded" in getattr(item, "fixturenames", ()) and item.path.is_relative_to(Path(__file__).parent)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    """Once the last test that uses the session's `jobsched dev` is torn down, the process is stopped
    (the fixture itself is finalized at the session's end, and finds it stopped)."""
    try:
        return (yield)
    finally:
        for dev in _SESSION_DEV:
            dev.done(item.nodeid)


def _wait_for_banner(proc: subprocess.Popen, seen: list[str], timeout: float) -> str:
    deadline = time.monotonic() + timeout
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        seen.append(line)
        match = re.search(r"API on (http://\S+)", line)
        if match:
            return match.group(1)
    raise AssertionError("jobsched dev did not print its URL:\n" + "".join(seen))


def _wait_for_health(url: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            ApiClient(url, timeout=2).health()
            return
        except ApiError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
