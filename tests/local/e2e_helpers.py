"""Helpers of the end-to-end tests: the real embedded mode in a child process, and run-record queries.

:class:`EmbeddedProcess` starts :class:`jobsched.local.embedded.EmbeddedMode` with the real functions,
exactly as ``jobsched dev`` does, but with a :class:`LocalConfig` the test chooses (``jobsched dev``
has no flag for the look-ahead). A child process, not a thread of the test process: moto keeps its
state per process and the real functions cache their settings once per process, so each test module
gets a fresh, isolated embedded mode. Run this file as ``python -m tests.local.e2e_helpers '<json>'``
to get that child: the JSON holds ``LocalConfig`` fields plus ``enqueue_horizon_seconds``.

Why a short look-ahead: a job's runs are queued ahead of their due instant (look-ahead and enqueue
horizon, decision 0001), and pausing withdraws them; with the default 60 s a pause shorter than a
minute never reaches the misfire policy. With 2 s the tests see misfires after a pause of seconds.

Why a 2 s tick: every tick reads the due index's 32 partitions (one query each, decision 0016); a
tick a second costs about 12 % of a core in the child and its DynamoDB emulator, idle or busy, a tick
every 2 s half that (decision 0044, thirteenth pass). A tick as long as the look-ahead still queues
each whole-second occurrence before its instant: the tick at an even second t reads up to t + 2, the
next one from there. The six serial modules (per-second jobs paused, resumed or overlapped, starts
timed to the second) keep the ``tick_seconds=1.0`` their bounds were measured with.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import boto3

from jobsched.cli.client import ApiClient
from jobsched.local import collector
from jobsched.runtime import resources
from tests.children import start_reading

ROOT = Path(__file__).resolve().parents[2]


class EmbeddedProcess:
    """The embedded mode with the real functions in a child process; its output lines are collected."""

    def __init__(
        self,
        tenants: dict[str, str],
        *,
        lookahead_seconds: int = 2,
        enqueue_horizon_seconds: int = 2,
        tick_seconds: float = 2.0,
        shards: int = 2,
        extra_env: dict[str, str] | None = None,
        **config: Any,
    ):
        """``config``: further :class:`LocalConfig` fields (e.g. ``slots``, ``port`` (default 0: any
        free one), or ``admins``: tenants whose token is an administrator's; the embedded mode sets
        ``JOBSCHED_ADMIN_PRINCIPALS`` from it, so that variable in ``extra_env`` has no effect);
        ``extra_env``: variables for the child.

        ``container_concurrency`` defaults to 0 here (``jobsched dev --container-concurrency 0``: no
        container worker process; runs sent to the ``container`` queue wait there, as in a stack
        deployed with ``container_pool=false``): a module whose runs use the container pool passes
        ``container_concurrency=1``. The worker process cost each end-to-end mode about 0.9 s of CPU
        to start, in modules that never use it (decision 0044, fifteenth pass)."""
        options = {
            **config,
            "container_concurrency": config.get("container_concurrency", 0),
            "port": config.get("port", 0),
            "tenants": tenants,
            "demo": False,
            "shards": shards,
            "lookahead_seconds": lookahead_seconds,
            "tick_seconds": tick_seconds,
            "enqueue_horizon_seconds": enqueue_horizon_seconds,
        }
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "JOBSCHED_"))}
        env["PYTHONUNBUFFERED"] = "1"
        env.update(extra_env or {})
        self.process = start_reading(
            [sys.executable, "-m", "tests.local.e2e_helpers", json.dumps(options)], env=env, cwd=ROOT
        )
        self.lines: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        self.tokens = dict(tenants)
        self.url = ""

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_ready(self, timeout: float = 90.0) -> str:
        """Wait for the banner; returns the API URL. Fails with the child's output if it died."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in list(self.lines):
                if line.startswith("API on "):
                    self.url = line.removeprefix("API on ").strip()
                    return self.url
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        raise AssertionError("the embedded mode did not start:\n" + "\n".join(self.lines))

    def queue_depth(self, kind: str) -> int:
        """Messages in the ``kind`` queue, visible, in flight or delayed (read from the child's moto)."""
        line = next(line for line in self.lines if line.startswith("QUEUES "))
        url = json.loads(line.removeprefix("QUEUES "))[kind]
        sqs = boto3.client(
            "sqs",
            endpoint_url=url.split("/", 3)[0] + "//" + url.split("/", 3)[2],
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
        names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
        names.append("ApproximateNumberOfMessagesDelayed")
        attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
        return sum(int(attributes.get(name, 0)) for name in names)

    def _moto(self, service: str) -> Any:
        """A client of the child's moto server for ``service`` (its endpoint from the ``ENV`` line)."""
        env = self.environment()
        return boto3.client(
            service,
            endpoint_url=env.get(f"AWS_ENDPOINT_URL_{service.upper()}", env["AWS_ENDPOINT_URL"]),
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )

    def share_holders(self, queue: str, tenant: str) -> set[str]:
        """The invocations registered in ``tenant``'s fair share item of ``queue``'s pool whose lease
        has not ended (read strongly consistent from the child's moto; decision 0057)."""
        item = (
            self._moto("dynamodb")
            .get_item(
                TableName=self.environment()["JOBSCHED_LEASES_TABLE"],
                Key={"lease_key": {"S": f"share#{queue}#{tenant}"}},
                ConsistentRead=True,
            )
            .get("Item", {})
        )
        now_ms = time.time() * 1000
        holders = item.get("holders", {}).get("M", {})
        return {name for name, until in holders.items() if int(until["N"]) > now_ms}

    def environment(self) -> dict[str, str]:
        """The embedded mode's environment for a container worker process (its ``ENV`` line)."""
        line = next(line for line in self.lines if line.startswith("ENV "))
        return dict(json.loads(line.removeprefix("ENV ")))

    def client(self, tenant: str) -> ApiClient:
        return ApiClient(self.url, token=self.tokens[tenant], timeout=60)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


# --- run records ------------------------------------------------------------------------------------


def parse(instant: str) -> datetime:
    return datetime.fromisoformat(instant.replace("Z", "+00:00"))


def runs_of(client: ApiClient, job_id: str) -> list[dict[str, Any]]:
    """Every run of the job, oldest scheduled first."""
    runs = [r for r in client.list_all("/runs", {"job_id": job_id}) if r.get("job_id") == job_id]
    return sorted(runs, key=lambda r: (r["scheduled_at"], r["id"]))


def run_state(client: ApiClient, run_id: str, *states: str) -> dict[str, Any] | None:
    """The run when it is in one of ``states``, else None (for ``wait_for``)."""
    run = client.get_run(run_id)
    return run if run["state"] in states else None


def job(name: str, schedule: str, handler: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "schedule": schedule, "target": {"handler": handler}, **extra}


# --- the child process ------------------------------------------------------------------------------

VALIDATE_HANDLER = "e2e.validate"
#: The variables of the embedded mode's environment the ``ENV`` line carries.
ENV_PREFIXES = ("AWS_", "JOBSCHED_", "POWERTOOLS_", "MOTO_", "IAM_CALLS_DIR")


def validate(payload: dict, ctx: Any) -> dict:
    """A handler whose outcome depends on the payload only: ``{"valid": true}`` succeeds, anything else
    fails permanently -- so a dead letter can be replayed with a corrected payload. Registered in the
    child only (the test process's handler registry stays as the other tests expect it)."""
    from jobsched.core.errors import PermanentError

    if payload.get("valid") is not True:
        raise PermanentError("payload.valid must be true")
    return {"valid": True, "attempt": ctx.attempt}


def main(argv: list[str]) -> int:
    """Run the embedded mode until SIGTERM/SIGINT, printing ``API on <url>`` and the run events."""
    collector.quiet()  # during the imports below (a child of its own): EmbeddedMode.start() settles it
    options = json.loads(argv[0])
    os.environ[resources.ENV_ENQUEUE_HORIZON_SECONDS] = str(options.pop("enqueue_horizon_seconds"))
    from jobsched.local.config import LocalConfig
    from jobsched.local.embedded import EmbeddedMode
    from jobsched.targets.registry import job as register

    register(VALIDATE_HANDLER)(validate)

    terminal = sys.stdout
    # The functions' JSON logs go to a file, the event lines to the parent (as `jobsched dev` does).
    log = tempfile.NamedTemporaryFile(  # noqa: SIM115 -- open until os._exit below
        "w", prefix="jobsched-e2e-", suffix=".log", delete=False, buffering=1
    )
    sys.stdout = log

    def emit(line: str) -> None:
        print(line, file=terminal, flush=True)

    mode = EmbeddedMode(LocalConfig(**options), out=emit)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: mode.request_stop())
    try:
        mode.start()
        emit(f"logs {log.name}")
        assert mode.provisioned is not None
        queues = {kind: ref.url for kind, ref in mode.provisioned.queues.items()}
        emit(f"QUEUES {json.dumps(queues)}")
        # What a container worker process of this embedded mode runs with (the tests start their own)
        env = {k: v for k, v in mode.container_environment().items() if k.startswith(ENV_PREFIXES)}
        emit(f"ENV {json.dumps(env)}")
        emit(f"API on {mode.api_url}")
        mode.wait()
    finally:
        mode.stop()
    terminal.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
