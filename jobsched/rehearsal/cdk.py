"""The real AWS CDK CLI, pinned in package.json, pointed at the emulated account.

``npm ci`` installs the CLI into ``./node_modules`` (no global install); every command then runs with
the endpoint variables the CLI honours -- ``AWS_ENDPOINT_URL`` for every SDK client it makes, and
``AWS_ENDPOINT_URL_S3_FOR_CLOUDFORMATION`` for the template URL it hands CloudFormation (read in the
CLI's ``restUrlFromManifest``, not in its docs) -- and fake credentials. Synthesis runs inside the CLI
as on a user's machine: cdk.json's ``app`` (``.venv/bin/python app.py``), bundling the Lambda asset.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path


class RehearsalError(RuntimeError):
    """A step of the rehearsal failed: the product, or the harness, is wrong (the message says which)."""


def cli_environment(endpoint_url: str, template_endpoint_url: str, region: str) -> dict[str, str]:
    """The variables that point the CDK CLI (and the app it runs) at the emulated account."""
    return {
        "AWS_ENDPOINT_URL": endpoint_url,
        "AWS_ENDPOINT_URL_S3_FOR_CLOUDFORMATION": template_endpoint_url,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": region,
        "AWS_DEFAULT_REGION": region,
        "CDK_DISABLE_CLI_TELEMETRY": "true",
        "CDK_DISABLE_VERSION_CHECK": "true",
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
        "AWS_SDK_JS_SUPPRESS_MAINTENANCE_MODE_MESSAGE": "1",
        "NODE_NO_WARNINGS": "1",
    }


def install_cli(root: Path, *, run: Callable[..., subprocess.CompletedProcess[str]] = subprocess.run) -> Path:
    """``npm ci`` the pinned CLI into ``root/node_modules`` unless that exact install is there."""
    cdk = root / "node_modules" / ".bin" / "cdk"
    marker = root / "node_modules" / ".package-lock.json"
    lock = root / "package-lock.json"
    if not (cdk.exists() and marker.exists() and marker.stat().st_mtime >= lock.stat().st_mtime):
        done = run(
            ["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=root,
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise RehearsalError(
                f"npm ci failed (the harness, not the product): {done.stderr.strip()[-800:]}"
            )
    return cdk


@dataclass
class Step:
    """One CLI command as it ran: its arguments, exit code, seconds and the tail of its output."""

    args: tuple[str, ...]
    returncode: int
    seconds: float
    output: str = field(repr=False, default="")

    @property
    def ok(self) -> bool:
        return self.returncode == 0


class CdkCli:
    """Runs ``cdk <args>`` in ``root`` against the emulated account; each run logged to ``log``."""

    TIMEOUT_SECONDS = 900

    def __init__(self, root: Path, cdk: Path, environ: Mapping[str, str], log: Path, outdir: Path):
        self.root = root
        self.cdk = cdk
        self.environ = {**os.environ, **environ}
        self.log = log
        self.outdir = outdir
        self.steps: list[Step] = []

    def run(self, *args: str, cwd: Path | None = None) -> Step:
        """``cdk <args>`` in the project (or in ``cwd``: a directory without cdk.json runs no app)."""
        command = [str(self.cdk), *args, "--output", str(self.outdir), "--no-color", "--ci"]
        started = time.monotonic()
        done = subprocess.run(
            command,
            cwd=cwd or self.root,
            env=self.environ,
            capture_output=True,
            text=True,
            timeout=self.TIMEOUT_SECONDS,
            check=False,
        )
        output = _quiet(done.stdout + done.stderr)
        step = Step(tuple(args), done.returncode, time.monotonic() - started, output)
        with self.log.open("a") as log:
            log.write(f"$ cdk {' '.join(args)}  (exit {done.returncode}, {step.seconds:.1f} s)\n{output}\n")
        self.steps.append(step)
        return step

    def must(self, *args: str, cwd: Path | None = None) -> Step:
        step = self.run(*args, cwd=cwd)
        if not step.ok:
            tail = "\n".join(step.output.strip().splitlines()[-12:])
            raise RehearsalError(f"cdk {' '.join(args)} exited {step.returncode}:\n{tail}")
        return step


_NOISE = (
    "NodeVersionSupportWarning",
    "node >=22",
    "upgrade to node",
    "a.co/c895JFp",
    "--trace-warnings",
    "To continue receiving updates",
    "versions published after",
)


def _quiet(output: str) -> str:
    """The CLI's output without the AWS SDK's Node.js support notice, repeated by every command."""
    return "\n".join(line for line in output.splitlines() if not any(n in line for n in _NOISE))


def deploy_args(context: Sequence[str] = (), *, outputs_file: Path | None = None) -> list[str]:
    """``cdk deploy`` as the rehearsal runs it: no approval prompt, CreateStack/UpdateStack directly
    (gap ``change-set-update``), every stack output written to ``outputs_file``."""
    args = ["deploy", "--require-approval", "never", "--method=direct"]
    for item in context:
        args += ["-c", item]
    if outputs_file is not None:
        args += ["--outputs-file", str(outputs_file)]
    return args
