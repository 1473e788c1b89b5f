"""The load of ``make bench-load`` (:mod:`jobsched.bench.load`): tenants creating, listing, reading,
triggering and cancelling, against the embedded mode's API on loopback.

Each simulated user is one tenant's client (``JOBSCHED_LOAD_TOKENS``: comma-separated tokens, users
take them in turn) and stops after ``JOBSCHED_LOAD_REQUESTS`` tasks, so a run is bounded in requests
as well as in time. Jobs are one-off ``at(2099-...)``: no scheduled run interferes, every run is a
manual trigger. Each trigger's run id is appended to the ledger (``JOBSCHED_LOAD_LEDGER``, one JSON
line per job or run), which the driver compares with what the API lists afterwards.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import threading
from typing import Any

from locust import HttpUser, between, events, task
from locust.exception import StopUser

TOKENS = [t for t in os.environ.get("JOBSCHED_LOAD_TOKENS", "").split(",") if t]
REQUESTS_PER_USER = int(os.environ.get("JOBSCHED_LOAD_REQUESTS", "200"))
LEDGER = os.environ.get("JOBSCHED_LOAD_LEDGER", "")
_next_token = itertools.count()
_ledger_lock = threading.Lock()


def _record(entry: dict[str, Any]) -> None:
    if LEDGER:
        with _ledger_lock, open(LEDGER, "a", encoding="utf-8") as out:
            out.write(json.dumps(entry) + "\n")


class TenantUser(HttpUser):
    """One tenant's client: a mix weighted towards reads, as an operator console and a CI would."""

    wait_time = between(0.0, 0.05)

    def on_start(self) -> None:
        self.token = TOKENS[next(_next_token) % len(TOKENS)]
        self.client.headers["Authorization"] = f"Bearer {self.token}"
        self.jobs: list[str] = []
        self.runs: list[str] = []
        self.done = 0
        self.create()

    def _tick(self) -> None:
        self.done += 1
        if self.done >= REQUESTS_PER_USER:
            raise StopUser()

    def _json(self, response: Any) -> Any:
        try:
            return response.json()
        except ValueError:
            return None

    @task(2)
    def create(self) -> None:
        body = {
            "name": f"load-{random.randrange(10**6)}",
            "schedule": "at(2099-01-01T00:00:00)",
            "target": {"handler": "demo.echo"},
            "payload": {"n": random.randrange(1000)},
        }
        with self.client.post("/jobs", json=body, name="POST /jobs", catch_response=True) as response:
            data = self._json(response)
            if response.status_code == 201 and data:
                self.jobs.append(data["id"])
                _record({"tenant": self.token, "job": data["id"]})
                response.success()
            else:
                response.failure(f"{response.status_code} {response.text[:200]}")
        self._tick()

    @task(3)
    def list_jobs(self) -> None:
        self.client.get("/jobs?limit=20", name="GET /jobs")
        self._tick()

    @task(3)
    def get_job(self) -> None:
        if self.jobs:
            self.client.get(f"/jobs/{random.choice(self.jobs)}", name="GET /jobs/{id}")
        self._tick()

    @task(3)
    def trigger(self) -> None:
        if not self.jobs:
            return
        job = random.choice(self.jobs)
        with self.client.post(
            f"/jobs/{job}/trigger", json={}, name="POST /jobs/{id}/trigger", catch_response=True
        ) as response:
            data = self._json(response)
            if response.status_code == 201 and data:
                self.runs.append(data["id"])
                _record({"tenant": self.token, "job": job, "run": data["id"]})
                response.success()
            else:
                response.failure(f"{response.status_code} {response.text[:200]}")
        self._tick()

    @task(3)
    def get_run(self) -> None:
        if self.runs:
            self.client.get(f"/runs/{random.choice(self.runs)}", name="GET /runs/{id}")
        self._tick()

    @task(2)
    def list_runs(self) -> None:
        self.client.get("/runs?limit=20", name="GET /runs")
        self._tick()

    @task(1)
    def cancel(self) -> None:
        if not self.runs:
            return
        run = random.choice(self.runs)
        # A run that already ended answers 409: an expected answer of the race, not an error.
        with self.client.post(f"/runs/{run}/cancel", name="POST /runs/{id}/cancel", catch_response=True) as r:
            if r.status_code in (200, 409):
                r.success()
            else:
                r.failure(f"{r.status_code} {r.text[:200]}")
        self._tick()


@events.init_command_line_parser.add_listener
def _no_extra_options(parser: Any) -> None:
    """The load is configured by environment variables (above), not by options."""
