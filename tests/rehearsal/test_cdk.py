"""How the rehearsal runs the CDK CLI (jobsched/rehearsal/cdk.py)."""

from __future__ import annotations

import json
from pathlib import Path

from jobsched.rehearsal.cdk import _quiet, cli_environment, deploy_args

ROOT = Path(__file__).resolve().parents[2]


def test_the_cli_is_pinned_to_one_exact_version() -> None:
    package = json.loads((ROOT / "package.json").read_text())
    lock = json.loads((ROOT / "package-lock.json").read_text())
    version = package["devDependencies"]["aws-cdk"]
    assert version[0].isdigit() and version.count(".") == 2  # no range: ^, ~, *, x
    assert lock["packages"]["node_modules/aws-cdk"]["version"] == version


def test_the_cli_is_pointed_at_the_emulator_for_clients_and_the_template_url() -> None:
    env = cli_environment("http://127.0.0.1:5000", "http://localhost:5000", "eu-west-1")
    assert env["AWS_ENDPOINT_URL"] == "http://127.0.0.1:5000"
    assert env["AWS_ENDPOINT_URL_S3_FOR_CLOUDFORMATION"] == "http://localhost:5000"
    assert (env["AWS_REGION"], env["AWS_DEFAULT_REGION"]) == ("eu-west-1", "eu-west-1")
    assert env["CDK_DISABLE_CLI_TELEMETRY"] == "true"


def test_a_deploy_needs_no_approval_and_goes_direct() -> None:
    args = deploy_args(("shards=8", "alert_email=a@example.com"), outputs_file=Path("o.json"))
    assert args == [
        "deploy", "--require-approval", "never", "--method=direct",
        "-c", "shards=8", "-c", "alert_email=a@example.com", "--outputs-file", "o.json",
    ]  # fmt: skip


def test_the_node_support_notice_is_left_out_of_the_log() -> None:
    output = "(node:1) Warning: NodeVersionSupportWarning: The AWS SDK\nJobsched: deploying... [1/1]\n"
    assert _quiet(output) == "Jobsched: deploying... [1/1]"
