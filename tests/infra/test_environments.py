"""Synthesis for real environments (issue 26 §1): the CDK CLI binds the stack to the caller's account
and region (``CDK_DEFAULT_ACCOUNT``/``CDK_DEFAULT_REGION``), so everything that names an ARN must hold
with literal values as well as with tokens, and in every partition.

Each case goes through ``app.build_app`` exactly as ``cdk synth``/``cdk deploy`` do, with cdk-nag, and
the template is then linted by cfn-lint for the case's region. Inline code replaces the bundled asset
(the code is the same in every environment; tests/infra/conftest.py synthesizes it once). Each
deployment option docs/deploy.md lists appears in at least one bound environment.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_lambda as lambda_

from tests.infra.conftest import STACK, _synthesize, lint_errors

ACCOUNT = "123456789012"

#: (id, account, region, context): every environment kind and every deployment option of docs/deploy.md.
CASES = [
    ("agnostic-defaults", None, None, {}),
    ("us-east-1-defaults", ACCOUNT, "us-east-1", {}),
    ("eu-west-1-cmk", ACCOUNT, "eu-west-1", {"encryption": "cmk"}),
    (
        "eu-west-1-jwt",
        ACCOUNT,
        "eu-west-1",
        {"auth_mode": "jwt", "jwt_issuer": "https://issuer.example.com/", "jwt_audience": "jobsched"},
    ),
    (
        "us-east-1-console-pool-32-shards-no-reservation",
        ACCOUNT,
        "us-east-1",
        {"auth_mode": "jwt", "console_user_pool": "true", "shards": "32", "high_reserved_concurrency": "0"},
    ),
    ("us-east-1-1-shard", ACCOUNT, "us-east-1", {"shards": "1", "alert_email": "oncall@example.com"}),
    ("aws-cn-cmk", ACCOUNT, "cn-north-1", {"encryption": "cmk"}),
    ("aws-us-gov-cmk-jwt", ACCOUNT, "us-gov-west-1", {"encryption": "cmk", "auth_mode": "jwt",
                                                      "jwt_issuer": "https://issuer.example.com/",
                                                      "jwt_audience": "jobsched"}),
]  # fmt: skip


def _synth(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, account, region, context) -> dict[str, Any]:
    from app import build_app

    for name in ("CDK_DEFAULT_ACCOUNT", "CDK_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)
    if account:
        monkeypatch.setenv("CDK_DEFAULT_ACCOUNT", account)
        monkeypatch.setenv("CDK_DEFAULT_REGION", region)
    app = cdk.App(outdir=str(tmp_path), context=context)
    build_app(app, code=lambda_.Code.from_inline("def handler(event, context): pass"))
    synthesized = _synthesize(app, tmp_path)
    report = json.loads((tmp_path / "validation-report.json").read_text())
    (nag,) = [p for p in report["pluginReports"] if p["pluginName"] == "AwsSolutions"]
    return {
        "error": synthesized.validation_error,
        "nag": nag,
        "text": (tmp_path / f"{STACK}.template.json").read_text(),
        "template": synthesized.template,
    }


@pytest.fixture(params=CASES, ids=[case[0] for case in CASES])
def synthesized(request, tmp_path, monkeypatch) -> tuple[str | None, dict[str, Any]]:
    _, account, region, context = request.param
    return region, _synth(tmp_path, monkeypatch, account, region, context)


@pytest.mark.slow
def test_each_environment_synthesizes_clean(synthesized):
    # Given the stack bound to an account and region of any partition, or to none, with any option
    region, result = synthesized
    # Then cdk-nag passes: every acknowledgement still matches what it acknowledges
    assert result["error"] is None, result["error"]
    assert result["nag"]["violations"] == [], result["nag"]["violations"]
    assert result["nag"]["conclusion"] == "success"
    # And cfn-lint finds no error for that region (its resource types and properties)
    errors = lint_errors(result["text"], region or "us-east-1")
    assert errors == [], "\n".join(str(m) for m in errors)
    # And no ARN hard-codes the commercial partition: ARNs the stack builds use AWS::Partition
    literal = re.findall(r"arn:aws:[^\"\\]*", result["text"])
    assert literal == [], literal


@pytest.mark.slow
def test_a_bound_stack_names_its_account_and_region(tmp_path, monkeypatch):
    # Given the account and region the CDK CLI takes from the credentials
    result = _synth(tmp_path, monkeypatch, ACCOUNT, "eu-west-1", {})
    # Then ARNs the CDK formats carry them literally (so the acknowledgements must too), and the
    # state machine's SQS integrations name the partition through a substitution
    assert f"eu-west-1:{ACCOUNT}" in result["text"]
    (machine,) = [
        r for r in result["template"]["Resources"].values() if r["Type"] == "AWS::StepFunctions::StateMachine"
    ]
    assert machine["Properties"]["DefinitionSubstitutions"]["Partition"] == {"Ref": "AWS::Partition"}
    assert "arn:${Partition}:states:::sqs:sendMessage.waitForTaskToken" in json.dumps(
        machine["Properties"]["DefinitionString"]
    )


def _stack(context: dict[str, str]):
    from infra.config import StackConfig
    from infra.stack import JobschedStack

    app = cdk.App(context=context)
    config = StackConfig.from_context(app.node.try_get_context)
    return JobschedStack(
        app, STACK, config=config, code=lambda_.Code.from_inline("def handler(event, context): pass")
    )


@pytest.mark.slow
def test_synthesis_warns_about_the_concurrency_quota_the_reservation_needs():
    # Given the default reservations of the high worker (25: its mapping's ceiling with the default
    # fair share's head-room) and the long worker (5)
    from aws_cdk.assertions import Annotations, Match

    stack = _stack({})
    warnings = Annotations.from_stack(stack).find_warning(
        "*", Match.string_like_regexp("high_reserved_concurrency")
    )
    # Then the synth warns once per reserving function, naming its setting and the quota both need
    # (25 + 5 + Lambda's 100)
    assert len(warnings) == 1
    text = str(warnings[0].entry.data)
    assert "WorkerHigh reserves 25" in text
    assert "at least 130" in text and "-c high_reserved_concurrency=0" in text
    (long,) = Annotations.from_stack(stack).find_warning(
        "*", Match.string_like_regexp("long_reserved_concurrency")
    )
    assert "WorkerLong reserves 5" in str(long.entry.data) and "at least 130" in str(long.entry.data)


@pytest.mark.slow
def test_no_quota_warning_without_a_reservation():
    from aws_cdk.assertions import Annotations, Match

    stack = _stack({"high_reserved_concurrency": "0", "long_reserved_concurrency": "0"})
    assert Annotations.from_stack(stack).find_warning("*", Match.string_like_regexp("reserves")) == []
