"""End to end through the real embedded mode (decision 0058): a scheduled run that has not succeeded by
its job's deadline is reported once — a ``deadline_missed`` notification to the job's webhook, and
``deadline_missed_at`` on the run — while a job whose runs finish in time is never reported.

The sweeper reads a run once it has been due for its grace (2 minutes on AWS); here it sweeps every
5 s with a 15 s grace (``sweeper_grace_seconds``, ``jobsched dev --sweeper-grace-seconds``), so the
first report comes about 15-20 s after a run's instant."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from jobsched.cli.client import ApiClient
from tests.local.conftest import wait_for
from tests.local.e2e_helpers import EmbeddedProcess, job

pytestmark = pytest.mark.slow(seconds=60, waits=True)

TENANT, TOKEN = "e2e", "tok-e2e-deadline"


class _Receiver(BaseHTTPRequestHandler):
    seen: list[tuple[str, dict]] = []

    def log_message(self, *args):
        pass

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        self.seen.append((self.path, json.loads(self.rfile.read(length) or b"null")))
        self.send_response(204)
        self.end_headers()


@pytest.fixture(scope="module")
def receiver() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def client() -> Iterator[ApiClient]:
    process = EmbeddedProcess({TENANT: TOKEN}, sweeper_seconds=5.0, sweeper_grace_seconds=15)
    try:
        process.wait_ready()
        yield process.client(TENANT)
    finally:
        process.stop()


def _told(path: str) -> list[dict]:
    return [body for p, body in _Receiver.seen if p == path]


def test_a_run_slower_than_its_deadline_is_reported_once_and_a_timely_one_never(client, receiver):
    # Given a job every 30 s whose runs sleep 6 s against a 2 s deadline, and one whose runs echo at
    # once against a 60 s deadline, each telling its own webhook
    slow = client.create_job(
        job(
            "e2e.deadline-slow",
            "*/30 * * * * *",
            "demo.sleep",
            payload={"seconds": 6},
            deadline_seconds=2,
            notify={"webhook": f"{receiver}/slow"},
        )
    )
    timely = client.create_job(
        job(
            "e2e.deadline-timely",
            "*/30 * * * * *",
            "demo.echo",
            deadline_seconds=60,
            notify={"webhook": f"{receiver}/timely"},
        )
    )
    assert slow["deadline_seconds"] == 2 and timely["deadline_seconds"] == 60
    # When the sweeper has read their first runs (they ripen the grace, 15 s, after their instant)
    notes = wait_for(lambda: _told("/slow"), timeout=300, interval=1)
    # Then the slow job's run is reported: the webhook is told, the run shows when it was found
    first = notes[0]
    assert first["type"] == "deadline_missed" and first["job_id"] == slow["id"]
    # (the run is marked once the notification is settled, so a moment after the webhook was told:
    # read at once, a loaded CI run found it not yet marked)
    run = wait_for(
        lambda: (found := client.get_run(first["run_id"]))["deadline_missed_at"] and found,
        timeout=30,
        interval=0.5,
    )
    assert run["deadline_missed_at"] is not None and run["deadline_at"] == first["deadline_at"]
    # And after more sweeps, each run was reported once, and the timely job never
    time.sleep(15)
    ids = [n["run_id"] for n in _told("/slow")]
    assert len(ids) == len(set(ids))
    assert _told("/timely") == []
