"""The quickstart, run on what ``cdk deploy`` created.

:func:`run_scenario` starts the embedded mode on the deployed stack (``EmbeddedMode(existing=...)``:
no server of its own, nothing provisioned): the real function handlers, configured from the deployed
functions' environment variables, driven by the embedded mode's dispatcher ticks, queue pollers (in
place of the event source mappings) and HTTP bridge (in place of API Gateway). Then, over HTTP, as in
docs/quickstart.md: a job's runs succeed (dispatched by the ticks, and one triggered), a failing run
is dead-lettered and replayed, a chunked job completes through the deployed state machine.

The deployed API authorizes with IAM (SigV4): API Gateway verifies the signature and hands the
function the caller's ARN. :func:`iam_gateway` plays that part: it takes the caller's ARN from the
``x-rehearsal-caller`` header (which only the rehearsal's bridge reads) and puts it where API Gateway
would, so the function's own IAM path -- principal -> tenant mapping, administrators -- runs as on AWS.
"""

from __future__ import annotations

import contextlib
import io
import json
import time
import urllib.error
import urllib.request
import warnings
from collections.abc import Mapping
from typing import Any, TextIO

from jobsched.local.config import LocalConfig
from jobsched.local.embedded import EmbeddedMode
from jobsched.local.invoke import Handler, load_handler
from jobsched.rehearsal.checks import Report
from jobsched.runtime import resources

CALLER_HEADER = "x-rehearsal-caller"
TENANT = "rehearsal"
CHUNKED_MODULE = "jobsched.long_jobs.demo"


def iam_gateway(handler_path: str, *, default_caller: str | None = None) -> Handler:
    """The api handler behind API Gateway's IAM authorizer (imported on first use, once the
    environment is set, as Lambda imports it). ``default_caller``: the caller of a request without
    the caller header (a client that signs as that principal: ``jobsched deploy-check`` in
    :mod:`jobsched.rehearsal.guard`)."""
    loaded: list[Handler] = []

    def handler(event: dict[str, Any], context: Any) -> Any:
        if not loaded:
            loaded.append(load_handler(handler_path))
        caller = (event.get("headers") or {}).pop(CALLER_HEADER, None) or default_caller
        if caller:
            account = caller.split(":")[4]
            event.setdefault("requestContext", {})["authorizer"] = {
                "iam": {"userArn": caller, "accountId": account, "callerId": caller.rsplit("/", 1)[-1]}
            }
        return loaded[0](event, context)

    return handler


class Client:
    """A JSON client of the bridge, calling as one IAM principal."""

    def __init__(self, url: str, caller: str):
        self.url, self.caller = url.rstrip("/"), caller

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header(CALLER_HEADER, self.caller)
        request.add_header("content-type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, json.loads(response.read() or b"null")
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"null")

    def ok(self, method: str, path: str, body: Any = None) -> Any:
        status, answer = self.call(method, path, body)
        if status >= 300:
            raise AssertionError(f"{method} {path} answered {status}: {answer}")
        return answer

    def wait_run(self, run_id: str, states: set[str], timeout: float) -> dict[str, Any]:
        deadline, run = time.monotonic() + timeout, {}
        while time.monotonic() < deadline:
            run = self.ok("GET", f"/runs/{run_id}")
            if run.get("state") in states:
                return dict(run)
            time.sleep(0.5)
        raise AssertionError(
            f"run {run_id} is {run.get('state')!r} after {timeout:.0f} s, not one of {states}"
        )


def scenario_config(env: Mapping[str, str]) -> LocalConfig:
    """The embedded mode's settings for a deployed stack: shards and look-ahead from the deployed
    variables, quick ticks (1 s: the deployed schedules' rate(1 minute) would make the rehearsal
    minutes long), no demo jobs, an API on a free loopback port."""
    return LocalConfig(
        port=0,
        shards=int(env[resources.ENV_SHARDS]),
        lookahead_seconds=int(env[resources.ENV_LOOKAHEAD_SECONDS]),
        tick_seconds=1.0,
        sweeper_seconds=30.0,
        poll_wait_seconds=1,
        dlq_poll_wait_seconds=1,
        demo=False,
        retention_days=int(env.get(resources.ENV_RETENTION_DAYS, resources.DEFAULT_RETENTION_DAYS)),
    )


def run_scenario(
    report: Report,
    existing: Mapping[str, str],
    *,
    admin: str,
    log: TextIO | None = None,
    timeout: float = 60.0,
) -> None:
    """The quickstart on the deployed stack; each step a check in ``report``. The functions' own
    output (their JSON log lines, as Lambda would send them to CloudWatch) goes to ``log``."""
    user = f"arn:aws:iam::{admin.split(':')[4]}:user/rehearsal-user"
    handlers: dict[str, Handler | None] = {"api": iam_gateway("functions.api.handler")}
    mode = EmbeddedMode(
        scenario_config(existing), handlers=handlers, existing=existing, out=lambda _line: None
    )
    # Powertools warns at each flush of a function that published no metric (they are off here).
    warnings.filterwarnings("ignore", message="No application metrics to publish")
    with contextlib.redirect_stdout(log or io.StringIO()), mode:
        as_admin, client = Client(mode.api_url, admin), Client(mode.api_url, user)
        as_admin.ok("PUT", "/admin/principals", {"principal": user, "tenant": TENANT})
        status, _ = Client(mode.api_url, user + "-unmapped").call("GET", "/jobs")
        report.equal("scenario: an unmapped IAM principal is refused", status, 401)
        report.equal("scenario: the mapped principal lists its jobs", client.call("GET", "/jobs")[0], 200)
        _runs_succeed(report, client, timeout)
        _dead_letter_replayed(report, client, timeout)
        _chunked_job_completes(report, client, existing, timeout)


def _trigger_new_job(
    client: Client, name: str, schedule: str, handler: str, payload: dict[str, Any], timeout: float
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Create a job, trigger it, wait for that run to end: the job, the run as triggered, as ended."""
    body = {"name": name, "schedule": schedule, "target": {"handler": handler}, "payload": payload}
    job = client.ok("POST", "/jobs", body)
    run = client.ok("POST", f"/jobs/{job['id']}/trigger")
    return job, run, client.wait_run(run["id"], {"succeeded", "failed"}, timeout)


def _runs_succeed(report: Report, client: Client, timeout: float) -> None:
    job, _run, done = _trigger_new_job(
        client, "hello", "*/2 * * * * *", "demo.echo", {"message": "hello from the rehearsal"}, timeout
    )
    report.equal("scenario: a triggered run succeeds", done["state"], "succeeded")
    deadline, succeeded = time.monotonic() + timeout, list[dict[str, Any]]()
    while time.monotonic() < deadline and len(succeeded) < 3:
        runs = client.ok("GET", f"/runs?job_id={job['id']}&limit=50")["items"]
        succeeded = [r for r in runs if r["state"] == "succeeded"]
        time.sleep(1)
    report.check(
        "scenario: the dispatcher's ticks run the job on its schedule",
        len(succeeded) >= 3,
        f"{len(succeeded)} runs succeeded",
    )
    client.ok("POST", f"/jobs/{job['id']}/pause", {})


def _dead_letter_replayed(report: Report, client: Client, timeout: float) -> None:
    job, run, failed = _trigger_new_job(
        client, "always-fails", "@daily", "demo.fail", {"kind": "permanent"}, timeout
    )
    report.equal("scenario: a permanent failure fails the run", failed["state"], "failed")
    letters = client.ok("GET", f"/dead-letters?job_id={job['id']}")["items"]
    report.check(
        "scenario: the failed run is in the dead letters",
        any(letter.get("id", letter.get("run_id")) == run["id"] for letter in letters),
        f"{len(letters)} dead letters",
    )
    replayed = client.ok("POST", f"/dead-letters/{run['id']}/replay")
    report.check("scenario: a replay re-queues the run", replayed["state"] != "failed", replayed["state"])
    again = client.wait_run(run["id"], {"failed"}, timeout)
    report.check(
        "scenario: the replay is recorded and the run ran again (demo.fail fails again)",
        len(again["replays"]) == 1 and len(again["attempts"]) > len(failed["attempts"]),
        f"{len(again['replays'])} replays, attempts {len(failed['attempts'])} -> {len(again['attempts'])}",
    )


def _chunked_job_completes(report: Report, client: Client, env: Mapping[str, str], timeout: float) -> None:
    modules = env.get(resources.ENV_HANDLER_MODULES, "").split(",")
    if not report.check(f"scenario: the deployment loads {CHUNKED_MODULE}", CHUNKED_MODULE in modules):
        return
    job = client.ok(
        "POST",
        "/jobs",
        {
            "name": "chunked",
            "schedule": "@daily",
            "target": {"handler": "demo.chunked_sum"},
            "payload": {"numbers": [1, 2, 3, 4, 5, 6, 7], "chunks": 3, "item_seconds": 0.01},
        },
    )
    run = client.ok("POST", f"/jobs/{job['id']}/trigger")
    done = client.wait_run(run["id"], {"succeeded", "failed"}, timeout)
    report.equal(
        "scenario: a chunked job completes through the deployed state machine", done["state"], "succeeded"
    )
    report.equal("scenario: the chunked job's output", (done.get("output") or {}).get("sum"), 28)
