"""The worker running webhook targets end to end: a real HTTP server on 127.0.0.1, allowed by name."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from jobsched.core.models import RunState
from jobsched.services.deliveries import Delivery
from tests.aws.conftest_worker import Kit, sent_messages
from tests.aws.memory import memory_aws  # noqa: F401  (this file runs on the in-memory fakes)


class _Hook(BaseHTTPRequestHandler):
    answers: list[int] = []
    seen: list[dict] = []

    def log_message(self, *args):
        pass

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        self.seen.append(dict(self.headers))
        status = self.answers.pop(0) if self.answers else 200
        body = b'{"ok": true}'
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def hook():
    _Hook.answers, _Hook.seen = [], []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hook)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hook", _Hook
    server.shutdown()
    server.server_close()


@pytest.fixture
def kit(aws, clock):
    return Kit(aws, clock)


def test_a_webhook_5xx_is_retried_and_both_attempts_carry_the_run_id_as_idempotency_key(
    kit, clock, aws, hook
):
    # Given a webhook that answers 503 once, then 200, on a host the deployment allows
    url, server = hook
    server.answers = [503]
    run, msg = kit.new_run({"http": {"url": url, "method": "POST"}}, {"n": 1}, base_seconds=0, max_seconds=0)
    worker = kit.worker(allowed_http_hosts=("127.0.0.1",))
    # When the first attempt and its retry run
    assert worker.handle(Delivery.of(msg.to_json()), clock.now()).status == "retrying"
    [(body, _)] = sent_messages(aws)
    assert worker.handle(Delivery.of(json.dumps(body)), clock.now()).status == "succeeded"
    # Then the receiver saw the same idempotency key twice, and the run holds the 2xx answer
    assert [h["Idempotency-Key"] for h in server.seen] == [run.id, run.id]
    assert [h["X-Jobsched-Attempt"] for h in server.seen] == ["1", "2"]
    assert kit.runs.get(run.id).output == {"status": 200, "body": {"ok": True}}


def test_a_webhook_to_a_host_not_allowed_is_dead_lettered_without_a_request(kit, clock, hook):
    # Given the same local webhook, but no allow-list
    url, server = hook
    run, msg = kit.new_run({"http": {"url": url}}, {})
    # When it runs
    out = kit.worker().handle(Delivery.of(msg.to_json()), clock.now())
    # Then it failed permanently (SSRF guard) and the server was never called
    assert out.status == "dead_lettered" and "loopback" in out.detail["error"]
    assert server.seen == [] and kit.runs.get(run.id).state is RunState.FAILED
