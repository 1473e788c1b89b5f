"""End to end through the real embedded mode: a run that fails for good notifies its job's webhook
(a loopback HTTP server of the test, allowed as in the embedded mode) exactly once."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from jobsched.cli.client import ApiClient
from tests.local.conftest import wait_for
from tests.local.e2e_helpers import EmbeddedProcess, job, run_state

pytestmark = pytest.mark.slow

TENANT, TOKEN = "e2e-notify", "tok-e2e-notify"
SHARED_TENANTS = {TENANT: TOKEN}


class _Receiver(BaseHTTPRequestHandler):
    seen: list[tuple[str, dict, dict]] = []

    def log_message(self, *args):
        pass

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        self.seen.append((self.path, dict(self.headers), json.loads(self.rfile.read(length) or b"null")))
        self.send_response(204)
        self.end_headers()


@pytest.fixture(scope="module")
def receiver() -> Iterator[tuple[str, type[_Receiver]]]:
    """A webhook receiver on 127.0.0.1 (the embedded mode allows loopback hosts by name)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", _Receiver
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def process(shared_process: EmbeddedProcess) -> EmbeddedProcess:
    """Given the embedded mode with the real functions and this module's tenant (shared with other
    modules: tests/local/shared_embedded.py)."""
    return shared_process


@pytest.fixture
def client(process: EmbeddedProcess) -> ApiClient:
    return process.client(TENANT)


def _received(receiver, path: str) -> list[dict]:
    return [body for p, _, body in receiver[1].seen if p == path]


def test_a_run_that_fails_permanently_notifies_its_jobs_webhook_exactly_once(client, receiver) -> None:
    # Given a job whose handler fails permanently, with retries allowed, and a webhook to tell
    url = f"{receiver[0]}/job-hook"
    created = client.create_job(
        job(
            "e2e.notify",
            "@yearly",
            "demo.fail",
            payload={"kind": "permanent"},
            retry={"max_attempts": 3, "base_seconds": 1, "max_seconds": 1},
            notify={"webhook": url},
        )
    )
    assert created["notify"] == {"webhook": url}
    # When a run of it fails for good
    run_id = client.trigger_job(created["id"])["id"]
    failed = wait_for(lambda: run_state(client, run_id, "failed"), timeout=60, interval=0.3)
    # Then the webhook receives one notification naming the run, its error and the replay route
    [body] = wait_for(lambda: _received(receiver, "/job-hook"), timeout=30, interval=0.2)
    assert body["run_id"] == run_id and body["job_id"] == created["id"]
    assert body["reason"] == "permanent" and body["error"] == failed["error"] and body["attempts"] == 1
    assert body["replay"] == {"method": "POST", "path": f"/dead-letters/{run_id}/replay"}
    # And no second one follows; the dead letter says it was sent
    time.sleep(3)
    assert len(_received(receiver, "/job-hook")) == 1
    [dead] = client.list_all("/dead-letters", {"job_id": created["id"]})
    assert dead["notification"]["state"] == "sent" and dead["notification"]["sent"] == ["webhook"]


def test_the_tenant_default_is_told_when_the_job_names_nobody(client, receiver) -> None:
    # Given a tenant default webhook and a job without notify
    url = f"{receiver[0]}/tenant-hook"
    assert client.put_notify_settings({"webhook": url}) == {"notify": {"webhook": url}}
    created = client.create_job(
        job("e2e.notify-default", "@yearly", "demo.fail", payload={"kind": "permanent"})
    )
    # When a run fails for good
    run_id = client.trigger_job(created["id"])["id"]
    wait_for(lambda: run_state(client, run_id, "failed"), timeout=60, interval=0.3)
    # Then the tenant's webhook is told, once
    [body] = wait_for(lambda: _received(receiver, "/tenant-hook"), timeout=30, interval=0.2)
    assert body["run_id"] == run_id
    client.put_notify_settings({})
