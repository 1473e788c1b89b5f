"""A deploy of new handler code, end to end in ``jobsched dev`` (issue 29 §7; docs/handlers.md).

``jobsched dev`` runs as a child process with the project's handler module ``mixed_handlers``, which
registers ``mixed.report`` version 1 only. The embedded mode runs every function in that one process,
so "the code switched" is the registry changing there: the module's ``code.switch`` handler, run as a
job, registers version 2 beside version 1 (``{"code": "v1+v2"}``, what the first deploy of the
two-deploy procedure ships) and later removes version 1 (``{"code": "v2"}``, the second deploy).
``jobsched deploy-check`` runs as a child process in the project, with ``mixed_v2only`` as the new
code (version 2 only), against the dev process's API.

Time is the real clock of the dev process (its one-off job is due seconds after creation).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from jobsched.client import ApiClient, ApiError
from tests.local.conftest import wait_for
from tests.local.devproc import DevProcess

pytestmark = pytest.mark.slow(seconds=50, waits=True)

TENANT, TOKEN = "ops", "tok-e2e-versions"
#: The one-off run is due this long after its job is created: the code switches before (a few seconds
#: on an idle machine), inside the look-ahead (60 s), so it is queued at once.
SWITCH_WITHIN_SECONDS = 40
REPORT = "mixed.report"

SCHEMAS = """
REPORT_V1 = {
    "type": "object",
    "properties": {
        "rows": {"type": "integer"},
        "hold": {"type": "boolean"},
        "fail_first": {"type": "boolean"},
    },
    "required": ["rows"],
}
REPORT_V2 = {
    "type": "object",
    "properties": {
        "rows": {"type": "integer"},
        "format": {"enum": ["csv", "json"]},
        "hold": {"type": "boolean"},
        "fail_first": {"type": "boolean"},
    },
    "required": ["rows", "format"],
}


def report_v2(payload, ctx):
    return {"version": 2, "rows": payload["rows"], "format": payload["format"]}


def v1_to_v2(payload):
    return {**payload, "format": "csv"}
"""

# The code running in the dev process: version 1, and the switch that changes the registry.
MIXED_HANDLERS = (
    """
import threading

from jobsched.core.errors import RetryableError
from jobsched.targets.registry import job, lookup, unregister

#: Set once version 2 is registered: the runs of version 1 that wait on it end after the switch.
SWITCHED = threading.Event()
"""
    + SCHEMAS
    + """

@job("mixed.report", version=1, payload=REPORT_V1)
def report_v1(payload, ctx):
    if payload.get("fail_first") and ctx.attempt == 1:
        raise RetryableError("the first attempt fails, the retry runs after the switch")
    if payload.get("hold") or payload.get("fail_first"):
        SWITCHED.wait(120)
    # Version 1's meaning: rows as CSV of its own dialect.
    return {"version": 1, "rows": payload["rows"], "format": "csv-v1", "after_switch": SWITCHED.is_set()}


@job("code.switch")
def switch(payload, ctx):
    if payload["code"] == "v1+v2":
        job("mixed.report", version=2, payload=REPORT_V2, upgrades={1: v1_to_v2})(report_v2)
        SWITCHED.set()
    elif payload["code"] == "v2":
        unregister("mixed.report", 1)
    return {"newest": lookup("mixed.report").version}
"""
)

# The code about to be deployed, as deploy-check imports it: version 2 only.
MIXED_V2ONLY = (
    """
from jobsched.targets.registry import job
"""
    + SCHEMAS
    + """

job("mixed.report", version=2, payload=REPORT_V2, upgrades={1: v1_to_v2})(report_v2)


@job("code.switch")
def switch(payload, ctx):
    return {}
"""
)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("versions-project")
    (root / "mixed_handlers.py").write_text(MIXED_HANDLERS)
    (root / "mixed_v2only.py").write_text(MIXED_V2ONLY)
    return root


@pytest.fixture(scope="module")
def dev(project: Path) -> Iterator[tuple[DevProcess, ApiClient]]:
    """Given `jobsched dev` in the project, with one tenant whose token is also an administrator's."""
    process = DevProcess(
        "--no-demo",
        "--tenant",
        f"{TENANT}={TOKEN}",
        "--admin",
        TENANT,
        "--container-concurrency",
        "0",  # no run of this module uses the container pool: no container worker process
        env={"JOBSCHED_HANDLER_MODULES": "mixed_handlers"},
        cwd=project,
    )
    try:
        process.wait_for_line("run events", timeout=90)
        yield process, ApiClient(process.url, token=TOKEN, timeout=60)
    finally:
        try:
            process.stop(timeout=30)
        finally:
            process.kill()


def deploy_check(url: str, project: Path, modules: str) -> subprocess.CompletedProcess[str]:
    """`jobsched deploy-check` in the project, as its operator runs it before `cdk deploy`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "JOBSCHED_"))}
    env.update({"JOBSCHED_URL": url, "JOBSCHED_TOKEN": TOKEN, "JOBSCHED_CODE_VERSION": "v2only"})
    return subprocess.run(
        [sys.executable, "-m", "jobsched.cli", "deploy-check", "--handler-modules", modules],
        capture_output=True,
        text=True,
        env=env,
        cwd=project,
        timeout=120,
    )


def job_spec(
    name: str, payload: dict[str, Any], *, version: int | None = None, **extra: Any
) -> dict[str, Any]:
    target: dict[str, Any] = (
        {"handler": REPORT} if version is None else {"handler": REPORT, "version": version}
    )
    spec = {"name": name, "schedule": "@yearly", "target": target, "payload": payload, **extra}
    return spec


def ended(client: ApiClient, run_id: str, timeout: float = 90) -> dict[str, Any]:
    def done() -> dict[str, Any] | None:
        run = client.get_run(run_id)
        return run if run["state"] in ("succeeded", "failed", "cancelled") else None

    return dict(wait_for(done, timeout=timeout, interval=0.5))


def state_of(client: ApiClient, run_id: str, states: tuple[str, ...], timeout: float = 60) -> dict[str, Any]:
    return dict(
        wait_for(
            lambda: (r := client.get_run(run_id))["state"] in states and r, timeout=timeout, interval=0.3
        )
    )


def runs_of(client: ApiClient, job_id: str) -> list[dict[str, Any]]:
    return [r for r in client.list_all("/runs", {"job_id": job_id}) if r.get("job_id") == job_id]


def versions(run: dict[str, Any]) -> list[Any]:
    """The handler version each attempt of a run recorded."""
    return [attempt.get("handler_version") for attempt in run["attempts"]]


def handler_entry(client: ApiClient, version: int) -> dict[str, Any] | None:
    listing = client.request("GET", "/handlers", query={"scope": "all"})
    return next((h for h in listing["handlers"] if h["name"] == REPORT and h["version"] == version), None)


def switch_code(client: ApiClient, code: str) -> dict[str, Any]:
    switch = client.create_job(
        {
            "name": f"switch {code}",
            "schedule": "@yearly",
            "target": {"handler": "code.switch"},
            "payload": {"code": code},
        }
    )
    run = ended(client, client.trigger_job(switch["id"])["id"])
    assert run["state"] == "succeeded", run
    client.delete_job(switch["id"], version=client.get_job(switch["id"])["version"])
    return run


def test_a_payload_that_breaks_the_contract_is_refused_at_creation(dev: tuple[DevProcess, ApiClient]) -> None:
    _, client = dev
    # When a job's payload does not satisfy version 1's contract (rows must be an integer)
    with pytest.raises(ApiError) as refused:
        client.create_job(job_spec("bad payload", {"rows": "many"}))
    # Then the API refuses it with a 422 naming the field, and no job was written
    assert refused.value.status == 422
    assert "payload.rows" in refused.value.message
    assert not [j for j in client.list_all("/jobs") if j["name"] == "bad payload"]


def test_a_deploy_of_version_2_keeps_every_run_meaning_what_it_meant(
    dev: tuple[DevProcess, ApiClient], project: Path
) -> None:
    process, client = dev
    # Given, under code with only version 1: a run holding inside version 1, a run whose first attempt
    # fails and retries, a one-off run queued ahead (unbound), and a job pinned to version 1
    holding = client.create_job(job_spec("holding", {"rows": 1, "hold": True}))
    retrying = client.create_job(
        job_spec(
            "retrying",
            {"rows": 2, "fail_first": True},
            retry={"max_attempts": 3, "base_seconds": 1, "max_seconds": 2},
        )
    )
    due = (datetime.now(UTC) + timedelta(seconds=SWITCH_WITHIN_SECONDS)).replace(microsecond=0)
    queued = client.create_job(job_spec("queued ahead", {"rows": 3}, schedule=f"at({due:%Y-%m-%dT%H:%M:%S})"))
    pinned = client.create_job(job_spec("pinned", {"rows": 5}, version=1))
    assert [j.get("payload_version") for j in (holding, retrying, queued, pinned)] == [1, 1, 1, 1]
    held_run = client.trigger_job(holding["id"])["id"]
    retried_run = client.trigger_job(retrying["id"])["id"]
    state_of(client, held_run, ("running",))
    state_of(client, retried_run, ("retrying", "running"))
    (queued_run,) = wait_for(lambda: runs_of(client, queued["id"]), timeout=30)
    assert queued_run["state"] == "queued"

    # When version 2 is registered beside version 1 (the first deploy)
    switch_code(client, "v1+v2")
    assert client.get_run(queued_run["id"])["state"] == "queued", (
        f"the code took over {SWITCH_WITHIN_SECONDS} s to switch: the one-off run started before it"
    )

    # Then the runs bound to version 1 before the switch end as version 1, retries included
    held = ended(client, held_run)
    assert held["state"] == "succeeded" and held["output"]["version"] == 1 and held["output"]["after_switch"]
    assert versions(held) == [1]
    retried = ended(client, retried_run)
    assert retried["state"] == "succeeded" and retried["output"]["version"] == 1
    assert versions(retried) == [1, 1]
    # And the run queued ahead, unbound, binds version 2 at its first attempt, its payload upgraded
    ran = ended(client, queued_run["id"])
    assert ran["state"] == "succeeded"
    assert ran["output"] == {"version": 2, "rows": 3, "format": "csv"}
    assert versions(ran) == [2]
    # And the pinned job still runs version 1
    pinned_run = ended(client, client.trigger_job(pinned["id"])["id"])
    assert pinned_run["output"]["version"] == 1 and versions(pinned_run) == [1]
    # And a job created now is checked against version 2 and runs it
    new = client.create_job(job_spec("after the deploy", {"rows": 4, "format": "json"}))
    assert new.get("payload_version") == 2
    new_run = ended(client, client.trigger_job(new["id"])["id"])
    assert new_run["output"] == {"version": 2, "rows": 4, "format": "json"} and versions(new_run) == [2]

    # When version 1 is drained
    client.request("POST", f"/handlers/{REPORT}/versions/1/drain")
    # Then no job may pin it, and the newest version cannot be drained
    with pytest.raises(ApiError) as refused_pin:
        client.create_job(job_spec("pin a draining version", {"rows": 1}, version=1))
    assert refused_pin.value.status == 409
    with pytest.raises(ApiError) as refused_drain:
        client.request("POST", f"/handlers/{REPORT}/versions/2/drain")
    assert refused_drain.value.status == 409
    # And while the pinned job refers to version 1, it is draining, and deploy-check refuses its removal
    entry = handler_entry(client, 1)
    assert entry is not None and entry["status"] == "draining" and entry["jobs"] == 1
    refused = deploy_check(process.url, project, "mixed_v2only")
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert f"handler '{REPORT}' version 1 is not in the new code" in refused.stdout
    assert pinned["id"] in refused.stdout

    # When the pinned job moves to the newest version: its old payload is refused by version 2's
    # contract (422 naming the field), and accepted with the field
    with pytest.raises(ApiError) as refused_edit:
        client.update_job(
            pinned["id"], {"target": {"handler": REPORT}}, version=client.get_job(pinned["id"])["version"]
        )
    assert refused_edit.value.status == 422 and "payload.format" in refused_edit.value.message
    moved = client.update_job(
        pinned["id"],
        {"target": {"handler": REPORT}, "payload": {"rows": 5, "format": "csv"}},
        version=client.get_job(pinned["id"])["version"],
    )
    assert moved.get("payload_version") == 2
    # Then version 1 is drained and deploy-check lets the removal through
    entry = wait_for(
        lambda: (e := handler_entry(client, 1)) is not None and e["status"] == "drained" and e, timeout=30
    )
    assert all(entry[key] == 0 for key in ("jobs", "queued", "running", "retrying", "dead_lettered"))
    passed = deploy_check(process.url, project, "mixed_v2only")
    assert passed.returncode == 0, passed.stdout + passed.stderr

    # When version 1 is removed (the second deploy)
    switch_code(client, "v2")
    # Then the listing has only version 2, nothing is missing, nothing was dead-lettered or lost
    listing = client.request("GET", "/handlers", query={"scope": "all"})
    assert [(h["name"], h["version"]) for h in listing["handlers"] if h["name"] == REPORT] == [(REPORT, 2)]
    assert listing["missing"] == []
    assert client.list_all("/dead-letters") == []
    for job in (holding, retrying, queued, pinned, new):
        states = {r["state"] for r in runs_of(client, job["id"])}
        assert states == {"succeeded"}, (job["name"], states)
    moved_run = ended(client, client.trigger_job(pinned["id"])["id"])
    assert moved_run["output"] == {"version": 2, "rows": 5, "format": "csv"}
