"""``jobsched deploy-check`` before each ``cdk deploy`` of the rehearsal, as docs/deploy.md says.

Before the first deploy there is no API: the check runs with ``--first-deploy`` (it imports the
handler modules the deploy names and asks nothing). Before the update, the deployed API is asked
``GET /handlers?scope=all`` as the rehearsal's administrator: the embedded mode serves the deployed
api function on the deployed stack (``existing``; no other function runs), behind the rehearsal's
stand-in for API Gateway's IAM authorizer, which names the administrator as the caller of every
request (as a SigV4 signature with the administrator's credentials would). The command runs in this
process through its entry point (``jobsched.cli.main.main``), its output going to the rehearsal's.

The rehearsal's update changes ``shards`` only: the new code is the deployed code, and the check passes.
"""

from __future__ import annotations

import contextlib
import io
import warnings
from collections.abc import Callable, Mapping
from typing import Any

from jobsched.cli.main import main as cli_main
from jobsched.local.embedded import EmbeddedMode
from jobsched.local.invoke import Handler
from jobsched.rehearsal.checks import Report
from jobsched.rehearsal.scenario import CHUNKED_MODULE, iam_gateway, scenario_config

#: The rehearsal deploys these handler modules (its ``handler_modules`` context).
HANDLER_MODULES = CHUNKED_MODULE
#: The functions that do not run while the deployed API answers the check.
OFF = ("dispatcher", "worker", "dlq_consumer", "sweeper")


def deploy_check(*argv: str) -> tuple[int, str]:
    """``jobsched deploy-check <argv>`` in this process: its exit status and its output."""
    output = io.StringIO()
    with contextlib.redirect_stdout(output), contextlib.redirect_stderr(output):
        code = cli_main(
            ["deploy-check", "--handler-modules", HANDLER_MODULES, "--code-version", "rehearsal", *argv]
        )
    return code, output.getvalue().strip()


def check_before_first_deploy(report: Report, out: Callable[[str], Any]) -> None:
    code, said = deploy_check("--first-deploy")
    out(said)
    report.equal("deploy-check before the first deploy: nothing to strand", code, 0)


def check_before_update(
    report: Report, existing: Mapping[str, str], *, admin: str, out: Callable[[str], Any]
) -> None:
    """The check against the deployed API (see the module's docstring)."""
    handlers: dict[str, Handler | None] = {
        "api": iam_gateway("functions.api.handler", default_caller=admin),
        **dict.fromkeys(OFF),
    }
    mode = EmbeddedMode(scenario_config(existing), handlers=handlers, existing=existing, out=out)
    warnings.filterwarnings("ignore", message="No application metrics to publish")
    with contextlib.redirect_stdout(io.StringIO()), mode:
        # The api function builds its services once per process (its seam): forget them after this
        # check, so the scenario's first request builds them from the updated stack's variables.
        import functions.api

        with functions.api.seam.installed():
            code, said = deploy_check("--url", mode.api_url, "--no-sigv4")
    out(said)
    report.equal("deploy-check before the update: the deployed API is asked, nothing is stranded", code, 0)
