"""The functions' injection seam (jobsched/compose/seam.py): services built once from what is installed,
the deployment's parts when nothing is, and every install undone when its block ends."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from jobsched.aws.clients import Clients
from jobsched.aws.metering import Meter
from jobsched.compose.seam import PARTS, Parts, Seam
from jobsched.core.clock import FakeClock
from jobsched.runtime.clock import SystemClock
from jobsched.runtime.settings import ConfigurationError, Settings

T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
SETTINGS = Settings(jobs_table="jobs", runs_table="runs", leases_table="leases", queue_urls={"default": "q"})
FUNCTIONS = ("api", "dispatcher", "worker", "sweeper", "dlq_consumer")


def recording_seam(uses: Iterable[str] = PARTS) -> tuple[Seam[Parts], list[Parts]]:
    """A seam whose services are the parts they were built from; every build recorded."""
    builds: list[Parts] = []

    def build(parts: Parts) -> Parts:
        builds.append(parts)
        return parts

    return Seam("test", build, uses=uses), builds


def test_nothing_is_built_until_first_use_then_once():
    # Given a new seam
    seam, builds = recording_seam()
    assert builds == [] and not seam.built
    # When its services are asked for three times
    first = [seam.services() for _ in range(3)]
    # Then they were built once
    assert len(builds) == 1 and all(s is first[0] for s in first) and seam.built


def test_a_cold_start_raced_by_eight_threads_builds_once():
    # Given a slow build and eight first requests at once
    builds: list[int] = []

    def slow(parts: Parts) -> int:
        builds.append(1)
        time.sleep(0.05)
        return len(builds)

    seam = Seam("test", slow, uses=PARTS)
    results: list[int] = []
    threads = [threading.Thread(target=lambda: results.append(seam.services())) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # Then every request got the one build
    assert builds == [1] and results == [1] * 8


def test_with_nothing_installed_the_parts_are_the_deployment_s():
    # Given a seam nobody installed anything in
    parts = recording_seam()[0].parts
    # Then the clock is the wall clock, the sleep time.sleep, no meter or sink of a test
    assert isinstance(parts.clock, SystemClock) and parts.sleep is time.sleep
    assert (parts.settings, parts.clients, parts.meter, parts.metrics) == (None, None, None, None)
    # and the clients are new ones, made when asked for
    assert isinstance(parts.make_clients(), Clients)


def test_settings_not_installed_are_read_from_the_environment_naming_what_is_missing(monkeypatch):
    # Given an environment without the high queue's URL
    monkeypatch.delenv("JOBSCHED_QUEUE_URL_HIGH", raising=False)
    # When the parts' settings are read / Then the variable is named
    with pytest.raises(ConfigurationError, match="JOBSCHED_QUEUE_URL_HIGH is not set"):
        Parts().read_settings()
    # and installed settings are taken as they are
    assert Parts(settings=SETTINGS).read_settings() is SETTINGS


def test_an_install_rebuilds_from_its_parts_and_its_end_puts_the_old_ones_back():
    # Given services already built from the deployment's parts
    seam, builds = recording_seam()
    seam.services()
    clock, meter = FakeClock(T0), Meter()
    # When a clock and a meter are installed
    with seam.installed(clock=clock, meter=meter):
        inside = seam.services()
        # Then the services are built again from them, the other parts unchanged
        assert inside.clock is clock and inside.meter is meter and inside.sleep is time.sleep
        assert seam.clock is clock
    # And after the block the parts are as before, and the services built from them again
    after = seam.services()
    assert isinstance(after.clock, SystemClock) and after.meter is None
    assert len(builds) == 3


def test_installs_nest_and_an_inner_one_replaces_only_what_it_names():
    # Given a clock installed
    seam, _ = recording_seam()
    clock, other, settings = FakeClock(T0), FakeClock(T0), SETTINGS
    with seam.installed(clock=clock, settings=settings):
        # When another clock is installed inside
        with seam.installed(clock=other):
            # Then it replaces the clock and keeps the settings
            assert seam.services().clock is other and seam.services().settings is settings
        # And the outer install is back after the inner block
        assert seam.services().clock is clock


def test_an_install_is_undone_when_its_block_raises():
    seam, _ = recording_seam()
    with pytest.raises(RuntimeError), seam.installed(clock=FakeClock(T0)):
        raise RuntimeError("the test failed")
    assert isinstance(seam.clock, SystemClock)


def test_another_build_can_be_installed_and_calls_the_function_s_own():
    # Given a seam and a build that adjusts what the function's own build makes
    seam, builds = recording_seam()
    adjusted: list[Parts] = []

    def adjust(parts: Parts) -> Parts:
        adjusted.append(parts)
        return parts

    # When it is installed / Then it builds the services, and the function's own build is back after
    with seam.installed(build=adjust):
        seam.services()
    seam.services()
    assert len(adjusted) == 1 and len(builds) == 1


def test_a_part_the_function_does_not_build_from_is_refused():
    # Given a function that builds from a clock and clients only
    seam, _ = recording_seam(("clock", "clients"))
    # When a sleep is installed / Then it is refused, naming what the function builds from
    refused = r"does not build from sleep \(it builds from clients, clock\)"
    with pytest.raises(TypeError, match=refused), seam.installed(sleep=lambda seconds: None):
        pass
    assert seam.parts.sleep is time.sleep


def test_a_seam_names_only_parts_that_exist():
    with pytest.raises(ValueError, match="unknown parts"):
        Seam("test", lambda parts: None, uses=("clock", "logger"))


_IMPORT_EVERY_FUNCTION = """
import importlib
from jobsched.compose.seam import PARTS, Seam
for name in {names!r}:
    seam = importlib.import_module("functions." + name).seam
    assert isinstance(seam, Seam) and {{"clock", "clients"}} <= seam.uses <= PARTS, name
    print(name, "built" if seam.built else "not built")
"""


def test_every_function_has_one_seam_and_builds_nothing_at_import():
    # Given a fresh interpreter (no test has invoked a function in it)
    root = Path(__file__).resolve().parents[2]
    script = _IMPORT_EVERY_FUNCTION.format(names=FUNCTIONS)
    # When it imports every function module
    result = subprocess.run(
        [sys.executable, "-c", script],
        env={**os.environ, "PYTHONPATH": str(root)},
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )
    # Then each has a seam that builds from a clock and clients at least, and nothing is built yet
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split("\n")[:-1] == [f"{name} not built" for name in FUNCTIONS]


def test_the_worker_function_runs_a_delivery_on_the_in_memory_fakes_installed_in_its_seam(monkeypatch):
    """The seam takes the fakes' settings, clients and clock as it takes moto's: the entry point itself,
    event in and partial batch response out, runs on them."""
    from datetime import timedelta

    import functions.worker as worker_function
    from jobsched.compose.pipeline import job_service_from_settings
    from jobsched.local.invoke import LambdaContext
    from jobsched.targets.registry import RegistryCatalog, job, unregister
    from jobsched.testing import in_memory_aws

    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "jobsched")
    job("test.seam.invoice")(lambda payload, ctx: {"invoiced": payload["customer"]})
    try:
        # Given a job due at 09:00 created on the fakes at 08:59, and its message received at 09:00
        aws = in_memory_aws(start=T0 - timedelta(minutes=1))
        jobs = job_service_from_settings(aws.settings, aws.clients, catalog=RegistryCatalog())
        spec = {"name": "i", "schedule": "at(2026-03-02T12:00:00)", "payload": {"customer": "acme"}}
        created = jobs.create("acme", {**spec, "target": {"handler": "test.seam.invoice"}}, aws.clock.now())
        aws.clock.advance(timedelta(minutes=1))
        queue = aws.settings.queue_urls["default"]
        [message] = aws.queues.receive_message(QueueUrl=queue)["Messages"]
        record = {
            "messageId": message["MessageId"],
            "body": message["Body"],
            "receiptHandle": message["ReceiptHandle"],
            "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:" + queue.rsplit("/", 1)[-1],
            "attributes": {"ApproximateReceiveCount": "1"},
        }
        # When the worker function handles it with the fakes installed in its seam
        with worker_function.seam.installed(clock=aws.clock, settings=aws.settings, clients=aws.clients):
            response = worker_function.handler({"Records": [record]}, LambdaContext("worker", 900))
        # Then the record is acknowledged and the run succeeded with the handler's output
        assert response == {"batchItemFailures": []}
        [run] = jobs.runs.list_for_job(created.id)[0]
        assert (run.state.value, run.output) == ("succeeded", {"invoiced": "acme"})
    finally:
        unregister("test.seam.invoice")
