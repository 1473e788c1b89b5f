"""cdk-nag AwsSolutions: zero unacknowledged findings, every acknowledgement with a reason (both
encryption variants)."""

from __future__ import annotations

import json


def _report(synth) -> dict:
    report = json.loads((synth.outdir / "validation-report.json").read_text())
    (plugin,) = [p for p in report["pluginReports"] if p["pluginName"] == "AwsSolutions"]
    return plugin


def test_synthesis_passes_cdk_nag(each_synth):
    assert each_synth.validation_error is None, each_synth.validation_error


def test_no_unacknowledged_findings(each_synth):
    plugin = _report(each_synth)
    assert plugin["violations"] == []
    assert plugin["conclusion"] == "success"


def test_every_acknowledgement_states_a_reason(each_synth):
    acknowledged = _report(each_synth)["suppressedViolations"]
    assert acknowledged, "the report lists the acknowledged findings; none at all means nag did not run"
    for finding in acknowledged:
        assert len(finding["reason"]) >= 40, finding["ruleName"]


def test_only_expected_rules_are_acknowledged(each_synth):
    # A new kind of acknowledgement is a design decision: it must be added here on purpose
    rules = {f["ruleName"].split("[")[0] for f in _report(each_synth)["suppressedViolations"]}
    # the container pool's: its environment (resource names, no secret: ECS2), its VPC's flow logs (VPC7)
    assert rules <= {
        "AwsSolutions-IAM5",
        "AwsSolutions-S1",
        "AwsSolutions-SQS3",
        "AwsSolutions-APIG4",
        "AwsSolutions-ECS2",
        "AwsSolutions-VPC7",
    }
