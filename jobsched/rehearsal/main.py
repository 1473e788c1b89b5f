"""``make deploy-rehearsal``: the first-deploy checklist of docs/deploy.md, run against an emulated account.

Step by step, as the checklist: the pinned CDK CLI (``npm ci``), an account (a moto server on loopback,
:mod:`jobsched.rehearsal.server`), ``cdk bootstrap``, ``jobsched deploy-check --first-deploy``,
``cdk deploy``, the checks of what was deployed (:mod:`jobsched.rehearsal.checks`), ``jobsched
deploy-check`` against the deployed API (:mod:`jobsched.rehearsal.guard`), an update (``cdk deploy``
again with ``shards`` changed), the checks again, the quickstart on the deployed stack
(:mod:`jobsched.rehearsal.scenario`), ``cdk destroy``.
Exits 1 when a step or a check fails; the last line summarises the run either way.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import boto3

from jobsched.core.shares import DEFAULT_FAIR_SHARE, pool_ceiling
from jobsched.rehearsal import checks
from jobsched.rehearsal.cdk import CdkCli, RehearsalError, cli_environment, deploy_args, install_cli
from jobsched.rehearsal.emulator import GAPS, HARNESS_GAPS, PLACEHOLDER_TYPES
from jobsched.rehearsal.guard import check_before_first_deploy, check_before_update
from jobsched.rehearsal.scenario import CHUNKED_MODULE, run_scenario
from jobsched.rehearsal.server import EmulatedAccount
from jobsched.runtime import resources

REGION = "us-east-1"
#: The update: a setting docs/deploy.md says may be changed on a running stack ("Changing shards").
#: The update also turns on warm container tasks (the capacity function's scalable-target setting).
UPDATE_CONTEXT = ("shards=8", "capacity_max_warm_tasks=2")


def _clients(endpoint_url: str) -> dict[str, Any]:
    session = boto3.session.Session(
        aws_access_key_id="testing", aws_secret_access_key="testing", region_name=REGION
    )
    names = (
        "cloudformation",
        "lambda",
        "dynamodb",
        "sqs",
        "s3",
        "sns",
        "stepfunctions",
        "sts",
        "logs",
        "ecs",
    )
    return {name: session.client(name, endpoint_url=endpoint_url) for name in names}


def mapping_ceilings(context: dict[str, Any]) -> dict[str, int]:
    """Each queue's mapping ``MaximumConcurrency`` the deployed stack must have: cdk.json's
    ``max_concurrency``, with the fair share's head-room on high, default and low (``fair_share`` from
    cdk.json, else the default: decision 0057)."""
    share = float(context.get("fair_share", DEFAULT_FAIR_SHARE))
    return {
        kind: pool_ceiling(int(base), share) if kind in resources.FAIR_SHARE_QUEUES else int(base)
        for kind, base in context["max_concurrency"].items()
    }


def check_deployment(
    report: checks.Report, clients: dict[str, Any], stack: str, root: Path
) -> checks.Deployment:
    """Every check of what the deployed functions' variables name."""
    deployment = checks.read_deployment(clients["cloudformation"], clients["lambda"], stack)
    env = deployment.environment()
    context = json.loads((root / "cdk.json").read_text())["context"]
    checks.check_functions(report, deployment)
    checks.check_tables(report, clients["dynamodb"], env)
    checks.check_queues(
        report, clients["sqs"], clients["lambda"], env, deployment.functions, mapping_ceilings(context)
    )
    checks.check_state_machine(report, clients["stepfunctions"], env, "aws")
    checks.check_capacity(report, clients["sqs"], clients["lambda"], env, deployment.outputs)
    checks.check_bucket_and_topic(
        report, clients["s3"], clients["sns"], env, deployment.outputs.get("AlertTopicArn")
    )
    checks.check_outputs(report, deployment.outputs, env)
    checks.check_log_group(report, clients["logs"], env)
    account = clients["sts"].get_caller_identity()["Account"]
    checks.check_container_pool(report, clients["ecs"], deployment.outputs, env, container_image(account))
    return deployment


def _stack_resources(clients: dict[str, Any], stack: str) -> list[dict[str, Any]]:
    return list(clients["cloudformation"].describe_stack_resources(StackName=stack)["StackResources"])


def _stack_gone(clients: dict[str, Any], stack: str) -> bool:
    try:
        stacks = clients["cloudformation"].describe_stacks(StackName=stack)["Stacks"]
    except Exception:  # the stack no longer exists
        return True
    return all(s["StackStatus"] == "DELETE_COMPLETE" for s in stacks)


def _existing(deployment: checks.Deployment, endpoint_url: str) -> dict[str, str]:
    """The environment the deployed functions run with in the embedded mode: their variables, the
    emulated account's endpoint and credentials."""
    return {
        **deployment.environment(),
        "AWS_ENDPOINT_URL": endpoint_url,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": REGION,
        "AWS_DEFAULT_REGION": REGION,
        "POWERTOOLS_METRICS_DISABLED": "true",
    }


def container_image(account: str) -> str:
    """The prebuilt image the rehearsal deploys the container pool with (``-c container_image``): the
    machine has no Docker daemon to build the Dockerfile's image, and the emulator runs no container."""
    return f"{account}.dkr.ecr.{REGION}.amazonaws.com/jobsched:rehearsal"


class Rehearsal:
    def __init__(self, root: Path, workdir: Path, out: Any = print):
        self.root, self.workdir, self.out = root, workdir, out
        self.report = checks.Report()
        self.resources = 0
        self.placeholders = 0
        self.started = time.monotonic()

    def run(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        log = self.workdir / "cdk.log"
        log.write_text("")
        cdk = install_cli(self.root)
        self.out(f"CDK CLI: {cdk} (npm ci from package-lock.json); CLI output in {log}")
        account_server = EmulatedAccount()
        account_server.start(dict(os.environ))
        try:
            self._steps(account_server, cdk, log)
        finally:
            account_server.stop()

    def _steps(self, server: EmulatedAccount, cdk: Path, log: Path) -> None:
        clients = _clients(server.endpoint_url)
        account = clients["sts"].get_caller_identity()["Account"]
        admin = f"arn:aws:iam::{account}:user/rehearsal-admin"
        self.out(f"emulated account {account} in {REGION} at {server.endpoint_url}")
        cli = CdkCli(
            self.root,
            cdk,
            cli_environment(server.endpoint_url, server.localhost_url, REGION),
            log,
            self.workdir / "cdk.out",
        )
        stack = json.loads((self.root / "cdk.json").read_text())["context"].get("stack_name", "Jobsched")
        context = (
            f"handler_modules={CHUNKED_MODULE}",
            f"admin_principals={admin}",
            f"container_image={container_image(account)}",
        )
        # Bootstrapping needs no app: run outside the project, the CLI does not synthesize it first.
        self._step(cli, "bootstrap", f"aws://{account}/{REGION}", cwd=self.workdir)
        check_before_first_deploy(self.report, self.out)
        self._step(cli, *deploy_args(context, outputs_file=self.workdir / "outputs.json"))
        deployment = check_deployment(self.report, clients, stack, self.root)
        self._count(clients, stack)
        check_before_update(
            self.report, _existing(deployment, server.endpoint_url), admin=admin, out=self.out
        )
        self._step(cli, *deploy_args((*context, *UPDATE_CONTEXT)))
        deployment = check_deployment(self.report, clients, stack, self.root)
        self._check_update(clients, stack, deployment)
        self._count(clients, stack)
        # The default synthesis (the Dockerfile's image asset, which needs Docker to deploy), made while
        # the quickstart runs: the same context as the update but container_image.
        default = [*context[:2], *UPDATE_CONTEXT]
        synth = threading.Thread(
            target=cli.run, args=("synth", "--quiet", *(a for c in default for a in ("-c", c)))
        )
        synth.start()
        started = time.monotonic()
        with (self.workdir / "functions.log").open("w") as functions_log:
            run_scenario(
                self.report, _existing(deployment, server.endpoint_url), admin=admin, log=functions_log
            )
        self.out(f"quickstart on the deployed stack: {time.monotonic() - started:.1f} s")
        synth.join()
        step = cli.steps[-1]
        if self.report.check("cdk synth (default: the image asset)", step.ok, step.output[-800:]):
            checks.check_image_asset(self.report, cli.outdir)
        self.out(
            f"cdk synth (the image asset, not deployed: no Docker): exit {step.returncode} "
            f"in {step.seconds:.1f} s"
        )
        # The assembly the update deployed (the app is not synthesized a fourth time).
        self._step(cli, "destroy", "--force", "--app", str(cli.outdir), stack)
        self.report.check("destroy: the stack is gone", _stack_gone(clients, stack))

    def _step(self, cli: CdkCli, *args: str, cwd: Path | None = None) -> None:
        step = cli.must(*args, cwd=cwd)
        self.out(f"cdk {args[0]}: exit 0 in {step.seconds:.1f} s")

    def _count(self, clients: dict[str, Any], stack: str) -> None:
        found = _stack_resources(clients, stack)
        self.resources = len(found)
        self.placeholders = sum(item.get("ResourceType") in PLACEHOLDER_TYPES for item in found)
        failed = [i["LogicalResourceId"] for i in found if not i["ResourceStatus"].endswith("_COMPLETE")]
        self.report.check("deploy: every resource complete", not failed, f"not complete: {failed}")

    def _check_update(self, clients: dict[str, Any], stack: str, deployment: checks.Deployment) -> None:
        shards = {
            c["Environment"]["Variables"].get(resources.ENV_SHARDS) for c in deployment.functions.values()
        }
        self.report.equal("update: every function sees shards=8", shards, {"8"})
        ticks = [
            r
            for r in _stack_resources(clients, stack)
            if r.get("ResourceType") == "AWS::Scheduler::Schedule" and "Tick" in r["LogicalResourceId"]
        ]
        self.report.equal("update: one tick schedule per shard", len(ticks), 8)

    def summary(self, error: str | None) -> str:
        failures = self.report.failures
        verdict = "passed" if error is None and not failures else "FAILED"
        return (
            f"deploy rehearsal {verdict}: {self.resources} resources deployed ({self.placeholders} as "
            f"placeholders), {self.report.passed}/{len(self.report.results)} checks passed, "
            f"{len(GAPS) + len(HARNESS_GAPS)} emulator gaps worked around, "
            f"{time.monotonic() - self.started:.0f} s"
        )


def stop_on_sigterm() -> None:
    """Make SIGTERM raise ``SystemExit(143)`` in the main thread, so the CLI command under way is killed
    (``subprocess.run`` kills its child on any exception) and the emulated account is stopped
    (``finally``) before the process exits 143, without the summary line, instead of dying with the
    CLI command left running (docs/deploy.md, "The deploy rehearsal"). The default's ``cdk synth``,
    which runs on a thread of its own beside the quickstart, is not killed: the exit waits for it."""

    def _exit(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, _exit)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m jobsched.rehearsal", description=__doc__)
    parser.add_argument(
        "--root", type=Path, default=Path.cwd(), help="the repository (cdk.json, package.json)"
    )
    parser.add_argument("--workdir", type=Path, default=None, help="where cdk.out and the CLI log go")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    rehearsal = Rehearsal(root, args.workdir or root / ".jobsched" / "rehearsal")
    stop_on_sigterm()
    error = None
    try:
        rehearsal.run()
    except (RehearsalError, AssertionError) as exc:
        error = str(exc)
        print(f"error: {error}", file=sys.stderr)
    for failure in rehearsal.report.failures:
        print(f"check failed: {failure.name} ({failure.detail})", file=sys.stderr)
    print(rehearsal.summary(error))
    return 0 if error is None and not rehearsal.report.failures else 1
