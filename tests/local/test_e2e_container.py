"""The container pool end to end in the embedded mode, with a test-sized Lambda time limit (4 s), and
container worker processes the tests start with its environment (as on a user's own Kubernetes):

- a run longer than that limit, on the container queue, runs to its end in a container worker and
  succeeds on its first attempt;
- a container worker stopped mid-run with SIGTERM hands the run back (exit 0) and another worker
  process finishes the same attempt, with the run's idempotent effect once;
- a job created through the API on the container pool (its timeout over the limit, which the Lambda
  pool refuses) runs to its end in a container worker;
- one killed with SIGKILL after its first heartbeat loses no run: another worker takes it over once
  its lease expired (10 s, ``--lease-seconds``; then its message's visibility, the lease and half of
  it, 15 s after that heartbeat), the killed attempt recorded ``lost``, and the effect is not doubled;
- with no container worker running (the mode's own is off: ``--container-concurrency 0``, as a stack
  with ``container_pool=false``), a container-pool run waits ``queued`` with its message in the queue,
  and a worker started later runs it once.

The runs are put on the container queue as the dispatcher does for a container-pool job: the run
created in the Runs table, its message sent to ``JOBSCHED_QUEUE_URL_CONTAINER``. Real time, generous
bounds: the 16 s run outlasts the 4 s stop timeout by 12 s, and the killed worker's first heartbeat
(a third of its 10 s lease after the claim) would have to come over 6 s late for its lease to lapse,
so the module runs in the parallel part of ``make test`` beside the other workers (decision 0044,
eighth pass).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import boto3
import pytest

from jobsched.aws.metering import dynamo_for
from jobsched.aws.queues import send_run_message
from jobsched.aws.runs_store import RunsStore
from jobsched.client.api_client import ApiError
from jobsched.core.messages import RunMessage
from jobsched.core.models import RetrySpec, Run, make_run_id
from jobsched.runtime import resources
from jobsched.runtime.settings import Settings
from tests.children import die_with_parent
from tests.local.conftest import wait_for
from tests.local.e2e_helpers import ROOT, EmbeddedProcess, job

pytestmark = pytest.mark.slow(seconds=90, waits=True)

TENANT, TOKEN = "acme", "tok-acme"
LIMIT_SECONDS = 4
HANDLERS = "tests.local.container_handlers"
#: The killed worker's ``--lease-seconds``: its heartbeat (every third of it) sets the message's
#: visibility to the lease and half of it, so the takeover comes about 15 s after that heartbeat, not
#: after the queue's 60 s visibility timeout (a kill before the first heartbeat) or 90 s (the default lease).
KILLED_LEASE_SECONDS = 10
#: The workers' long poll (``--wait-seconds``), shorter than their stop timeout.
WAIT_SECONDS = 2
#: What a worker logs when it stops with a receive in flight (jobsched/compose/container_worker.py).
ABANDONED_RECEIVE = "a receive in flight at the stop timeout"


@pytest.fixture(scope="module")
def embedded() -> Iterator[EmbeddedProcess]:
    process = EmbeddedProcess(
        {TENANT: TOKEN},
        lambda_time_limit_seconds=LIMIT_SECONDS,
        container_concurrency=0,  # the tests' own worker processes are the only consumers
        extra_env={resources.ENV_HANDLER_MODULES: HANDLERS},
    )
    try:
        process.wait_ready()
        yield process
    finally:
        process.stop()


def queue_run(embedded: EmbeddedProcess, effects: Path, *, seconds: float, timeout: int = 600) -> RunMessage:
    """A run of ``e2e.long_work`` created queued and its message sent to the container queue."""
    env = embedded.environment()
    settings = Settings.from_env(env)
    endpoint = env["AWS_ENDPOINT_URL"]
    session = boto3.session.Session(
        aws_access_key_id="testing", aws_secret_access_key="testing", region_name=env["AWS_REGION"]
    )
    dynamodb = session.client("dynamodb", endpoint_url=env["AWS_ENDPOINT_URL_DYNAMODB"])
    sqs = session.client("sqs", endpoint_url=endpoint)
    now = datetime.now(UTC)
    job_id = f"job{uuid.uuid4().hex[:10]}"
    run = Run(
        id=make_run_id(job_id, now),
        job_id=job_id,
        tenant=TENANT,
        scheduled_at=now,
        due_at=now,
        created_at=now,
    )
    RunsStore(dynamo_for(settings, dynamodb), settings.runs_table).create(run)
    msg = RunMessage(
        run_id=run.id, job_id=job_id, tenant=TENANT, attempt=1, scheduled_at=now, due_at=now,
        target={"handler": "e2e.long_work"}, payload={"seconds": seconds, "effects": str(effects)},
        timeout_seconds=timeout, pool="container", retry=RetrySpec(max_attempts=3),
    )  # fmt: skip
    send_run_message(sqs, settings.queue_urls[resources.CONTAINER_KIND], msg, now)
    return msg


def start_worker(
    embedded: EmbeddedProcess, log: Path, *, stop_timeout: float = 4, lease_seconds: float | None = None
) -> subprocess.Popen[bytes]:
    """``jobsched worker --pool container`` with the embedded mode's environment (as on Kubernetes),
    its output in ``log``; its long poll (2 s) shorter than its stop timeout, so a stop waits for it;
    ``--lease-seconds`` when given."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "JOBSCHED_"))}
    env.update(embedded.environment())
    env["PYTHONUNBUFFERED"] = "1"
    command = [sys.executable, "-m", "jobsched.cli", "worker", "--pool", "container"]
    command += ["--stop-timeout", str(stop_timeout), "--wait-seconds", str(WAIT_SECONDS)]
    if lease_seconds is not None:
        command += ["--lease-seconds", str(lease_seconds)]
    with log.open("ab") as out:
        return subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, preexec_fn=die_with_parent()
        )


def stop(worker: subprocess.Popen[bytes], log: Path) -> int:
    """SIGTERM and the exit status (killed if it does not exit within 30 s). When the worker stopped
    with a long poll in flight (its log says so), that receive stays open at the queue until its wait
    ends, and a message sent meanwhile is received by it and hidden for the queue's visibility
    timeout, out of the next worker's sight, as on SQS: this waits the poll out, so the module's next
    test does not send its run into it (a CI run found the next test's worker seeing nothing for 60 s)."""
    if worker.poll() is None:
        worker.send_signal(signal.SIGTERM)
    try:
        code = worker.wait(30)
    except subprocess.TimeoutExpired:
        worker.kill()
        raise
    if ABANDONED_RECEIVE in log.read_text(errors="replace"):
        time.sleep(WAIT_SECONDS + 0.5)
    return code


def attempts(embedded: EmbeddedProcess, run_id: str) -> list[tuple[int, str | None]]:
    run = embedded.client(TENANT).get_run(run_id)
    return [(a["attempt"], a.get("outcome")) for a in run.get("attempts", [])]


def succeeded(embedded: EmbeddedProcess, run_id: str) -> dict | None:
    run = embedded.client(TENANT).get_run(run_id)
    return run if run["state"] == "succeeded" else None


def test_a_run_longer_than_the_lambda_limit_runs_to_its_end_in_a_container_worker(embedded, tmp_path) -> None:
    # Given the embedded mode with a 4 s Lambda limit and a container worker
    assert embedded.environment()[resources.ENV_LAMBDA_TIME_LIMIT] == str(LIMIT_SECONDS)
    worker = start_worker(embedded, tmp_path / "worker.log")
    try:
        # When a run of 8 s (heartbeating) is put on the container queue
        msg = queue_run(embedded, tmp_path / "effects", seconds=8)
        run = wait_for(lambda: succeeded(embedded, msg.run_id), timeout=120, interval=0.5)
    finally:
        code = stop(worker, tmp_path / "worker.log")
    # Then it ran to its end once, on its first attempt, and charged once; the worker exited 0
    assert run["output"] == {"worked": 8.0, "attempt": 1}
    assert attempts(embedded, msg.run_id) == [(1, "succeeded")]
    assert (tmp_path / "effects").read_text().splitlines() == [f"{msg.run_id} attempt 1"]
    assert code == 0


def test_a_worker_stopped_with_sigterm_hands_the_run_back_and_another_finishes_it_once(
    embedded, tmp_path
) -> None:
    # Given a long run claimed by a container worker
    effects, log = tmp_path / "effects", tmp_path / "worker.log"
    first = start_worker(embedded, log, stop_timeout=4)
    try:
        # 16 s of work: SIGTERM comes as it starts, so the 4 s stop timeout ends before the run does
        msg = queue_run(embedded, effects, seconds=16)
        wait_for(lambda: Path(str(effects) + ".started").exists(), timeout=60, interval=0.2)
        # When it gets SIGTERM mid-run
        code = stop(first, log)
    finally:
        if first.poll() is None:
            first.kill()
    # Then it exits 0 after handing the run back
    assert code == 0, log.read_text()
    assert "handed back" in log.read_text()
    # When another worker receives the message
    second = start_worker(embedded, log, stop_timeout=4)
    try:
        run = wait_for(lambda: succeeded(embedded, msg.run_id), timeout=150, interval=0.5)
    finally:
        stop(second, log)
    # Then the same attempt ran to the end (none used by the hand-back), and the effect happened once
    assert attempts(embedded, msg.run_id) == [(1, "handed_back"), (1, "succeeded")]
    assert run["output"]["attempt"] == 1
    assert effects.read_text().splitlines() == [f"{msg.run_id} attempt 1"]


def test_a_worker_killed_with_sigkill_loses_no_run_and_doubles_no_effect(embedded, tmp_path) -> None:
    # Given a run claimed by a container worker
    effects, log = tmp_path / "effects", tmp_path / "worker.log"
    first = start_worker(embedded, log, stop_timeout=4, lease_seconds=KILLED_LEASE_SECONDS)
    try:
        msg = queue_run(embedded, effects, seconds=8)
        wait_for(lambda: Path(str(effects) + ".started").exists(), timeout=60, interval=0.2)
        # and its first heartbeat (a third of the lease after the claim: the progress it wrote) has set
        # the message's visibility to the lease and half of it (15 s)
        client = embedded.client(TENANT)
        wait_for(lambda: client.get_run(msg.run_id).get("progress"), timeout=30, interval=0.1)
        # When it is killed (no hand-back) and another worker runs
        first.kill()
        first.wait(10)
    finally:
        if first.poll() is None:
            first.kill()
    second = start_worker(embedded, log, stop_timeout=4)
    try:
        # Then, once the killed worker's lease (10 s) expired and its message reappeared (5 s later), the
        # run is taken over and succeeds
        run = wait_for(lambda: succeeded(embedded, msg.run_id), timeout=240, interval=1.0)
    finally:
        stop(second, log)
    # with the killed attempt recorded lost, and the effect done once (attempt 1's result kept)
    assert attempts(embedded, msg.run_id) == [(1, "lost"), (2, "succeeded")]
    assert run["output"]["attempt"] == 2
    assert effects.read_text().splitlines() == [f"{msg.run_id} attempt 1"]


def test_a_container_pool_job_created_through_the_api_runs_past_the_limit_in_a_container_worker(
    embedded, tmp_path
) -> None:
    # Given the embedded mode with a 4 s Lambda limit, and a container worker
    client = embedded.client(TENANT)
    effects = tmp_path / "effects"
    payload = {"seconds": 6, "effects": str(effects)}
    spec = job("long-report", "@yearly", "e2e.long_work", payload=payload, timeout_seconds=60)
    # When a job whose timeout is over the limit asks for the Lambda pool, Then it is refused (4xx)
    with pytest.raises(ApiError) as refused:
        client.create_job({**spec, "pool": "lambda"})
    assert 400 <= refused.value.status < 500 and "timeout_seconds" in refused.value.message
    # When it asks for the container pool and is triggered
    created = client.create_job({**spec, "pool": "container"})
    with worker_running(embedded, tmp_path / "worker.log") as exit_code:
        run_id = client.trigger_job(created["id"])["id"]
        run = wait_for(lambda: succeeded(embedded, run_id), timeout=120, interval=0.5)
    # Then the container worker ran it to its end, once
    assert created["pool"] == "container" and run["output"] == {"worked": 6.0, "attempt": 1}
    assert attempts(embedded, run_id) == [(1, "succeeded")] and exit_code == [0]
    assert effects.read_text().splitlines() == [f"{run_id} attempt 1"]


def test_with_no_container_worker_a_container_run_waits_queued_and_a_worker_started_later_runs_it_once(
    embedded, tmp_path
) -> None:
    # Given the embedded mode started with no container worker (--container-concurrency 0, as a stack
    # deployed with container_pool=false: docs/local.md, docs/deploy.md) and a container-pool job
    client = embedded.client(TENANT)
    effects = tmp_path / "effects"
    payload = {"seconds": 1, "effects": str(effects)}
    created = client.create_job(
        {**job("waits-for-a-worker", "@yearly", "e2e.long_work", payload=payload), "pool": "container"}
    )
    # When it is triggered and nothing consumes the container queue for a few seconds
    before = embedded.queue_depth("container")
    run_id = client.trigger_job(created["id"])["id"]
    time.sleep(3)
    # Then the run waits queued, its message in the container queue
    assert client.get_run(run_id)["state"] == "queued"
    assert embedded.queue_depth("container") == before + 1
    # And a worker started then runs it to its end, once, and exits 0 when stopped
    with worker_running(embedded, tmp_path / "worker.log") as exit_code:
        run = wait_for(lambda: succeeded(embedded, run_id), timeout=120, interval=0.5)
    assert (run["output"], attempts(embedded, run_id)) == ({"worked": 1.0, "attempt": 1}, [(1, "succeeded")])
    assert effects.read_text().splitlines() == [f"{run_id} attempt 1"] and exit_code == [0]


@contextmanager
def worker_running(embedded: EmbeddedProcess, log: Path) -> Iterator[list[int]]:
    """A container worker process for the block; the list it yields holds its exit code afterwards."""
    worker = start_worker(embedded, log)
    exit_code: list[int] = []
    try:
        yield exit_code
    finally:
        exit_code.append(stop(worker, log))
