"""cdk-nag AwsSolutions: zero unacknowledged findings, every acknowledgement with a reason."""

from __future__ import annotations

import json


def _report(synth) -> dict:
    report = json.loads((synth.outdir / "validation-report.json").read_text())
    (plugin,) = [p for p in report["pluginReports"] if p["pluginName"] == "AwsSolutions"]
    return plugin


def test_synthesis_passes_cdk_nag(synth):
    assert synth.validation_error is None, synth.validation_error


def test_no_unacknowledged_findings(synth):
    plugin = _report(synth)
    assert plugin["violations"] == []
    assert plugin["conclusion"] == "success"


def test_every_acknowledgement_states_a_reason(synth):
    acknowledged = _report(synth)["suppressedViolations"]
    assert acknowledged, "the report lists the acknowledged findings; none at all means nag did not run"
    for finding in acknowledged:
        assert len(finding["reason"]) >= 40, finding["ruleName"]


def test_only_expected_rules_are_acknowledged(synth):
    # A new kind of acknowledgement is a design decision: it must be added here on purpose
    rules = {f["ruleName"].split("[")[0] for f in _report(synth)["suppressedViolations"]}
    assert rules <= {"AwsSolutions-IAM5", "AwsSolutions-S1", "AwsSolutions-SQS3", "AwsSolutions-APIG4"}
