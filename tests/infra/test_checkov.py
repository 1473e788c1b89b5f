"""checkov (offline) passes on the synthesized template: no failed check in either encryption
variant, every skipped check carries its reason, and with ``encryption=cmk`` the customer-managed-key
checks pass instead of being skipped."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import aws_cdk as cdk
import pytest

from infra.nag import skip_checkov

# Skipped in both variants, each for the reason written on the resource (docs/deploy.md).
ALWAYS_SKIPPED = {"CKV_AWS_115", "CKV_AWS_116", "CKV_AWS_117", "CKV_AWS_18", "CKV_AWS_21"}
# Skipped on the capacity function's policy when it may set the container pool's minimum
# (capacity_max_warm_tasks, which both synthesized apps set): RegisterScalableTarget on Resource '*'.
WARM_TASKS_SKIPPED = {"CKV_AWS_111"}
# "Use a customer-managed key": skipped with encryption=aws, passed with encryption=cmk.
CMK_CHECKS = {"CKV_AWS_27", "CKV_AWS_119", "CKV_AWS_158", "CKV_AWS_173"}


def run_checkov(template: Path) -> tuple[dict, str]:
    """checkov's JSON report on ``template`` and its stderr. ``--skip-download`` keeps it from
    fetching guidelines from the Prisma Cloud API; CKV_SKIP_PACKAGE_UPDATE_CHECK from asking PyPI for
    a newer release: no network, no wait, no warning."""
    env = {**os.environ, "CKV_SKIP_PACKAGE_UPDATE_CHECK": "TRUE"}
    command = [sys.executable, "-m", "checkov.main", "-f", str(template), "--framework", "cloudformation"]
    result = subprocess.run(
        [*command, "--skip-download", "--output", "json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert result.returncode in (0, 1), result.stderr  # 1 = failed checks, anything else = a crash
    return json.loads(result.stdout), result.stderr


def _describe(check: dict) -> str:
    return f"{check['check_id']} {check['resource']}: {check['check_name']}"


@pytest.fixture(scope="module")
def reports(synth, cmk_synth) -> dict[str, tuple[dict, str]]:
    return {
        name: run_checkov(s.outdir / "Jobsched.template.json")
        for name, s in (("aws", synth), ("cmk", cmk_synth))
    }


@pytest.mark.parametrize("variant", ["aws", "cmk"])
def test_template_passes_every_checkov_check(reports, variant):
    # Given the synthesized template of the variant, When checkov scans it
    report, _ = reports[variant]
    failed = report["results"]["failed_checks"]
    # Then no check fails (the message lists those that do)
    assert failed == [], "\n".join(_describe(c) for c in failed)
    assert report["summary"]["passed"] > 100, "checkov ran hardly any check: did it parse the template?"
    assert report["summary"]["parsing_errors"] == 0


@pytest.mark.parametrize("variant", ["aws", "cmk"])
def test_checkov_runs_offline_without_warnings(reports, variant):
    # Given checkov told not to download anything, Then it says nothing on stderr (no network warning)
    _, stderr = reports[variant]
    assert stderr.strip() == ""


@pytest.mark.parametrize("variant", ["aws", "cmk"])
def test_every_skip_states_its_reason(reports, variant):
    skipped = reports[variant][0]["results"]["skipped_checks"]
    assert skipped, "the report lists the skipped checks; none at all means the skips were not read"
    for check in skipped:
        assert len(check["check_result"].get("suppress_comment", "").strip()) >= 40, _describe(check)


def test_default_variant_skips_only_the_documented_checks(reports):
    skipped = {c["check_id"] for c in reports["aws"][0]["results"]["skipped_checks"]}
    assert skipped == ALWAYS_SKIPPED | WARM_TASKS_SKIPPED | CMK_CHECKS


def test_cmk_variant_passes_the_key_checks_without_skipping_them(reports):
    # Given encryption=cmk, Then the customer-managed-key checks are passed, none skipped
    results = reports["cmk"][0]["results"]
    skipped = {c["check_id"] for c in results["skipped_checks"]}
    passed = {c["check_id"] for c in results["passed_checks"]}
    assert skipped == ALWAYS_SKIPPED | WARM_TASKS_SKIPPED
    assert passed >= CMK_CHECKS


def test_checkov_reports_the_failures_it_finds(tmp_path):
    # Guard against a silently passing scanner: an unencrypted queue must fail CKV_AWS_27
    template = tmp_path / "bad.template.json"
    template.write_text('{"Resources": {"Q": {"Type": "AWS::SQS::Queue", "Properties": {}}}}')
    report, _ = run_checkov(template)
    assert "CKV_AWS_27" in {c["check_id"] for c in report["results"]["failed_checks"]}


def _queue() -> cdk.CfnResource:
    stack = cdk.Stack(cdk.App(), "S")
    return cdk.CfnResource(stack, "Q", type="AWS::SQS::Queue")


def test_a_skip_without_a_real_reason_is_refused():
    with pytest.raises(ValueError, match="real reason"):
        skip_checkov(_queue(), "CKV_AWS_27", "  ")


def test_skips_of_one_resource_accumulate_and_a_repeat_is_refused():
    # Given a resource with one skip, When a second check is skipped on it
    queue = _queue()
    skip_checkov(queue, "CKV_AWS_27", "first reason, long enough to be a reason")
    skip_checkov(queue, "CKV_AWS_28", "second reason, long enough to be a reason")
    # Then both are in its metadata, and skipping the first again is refused
    ids = [skip["id"] for skip in queue.get_metadata("checkov")["skip"]]
    assert ids == ["CKV_AWS_27", "CKV_AWS_28"]
    with pytest.raises(ValueError, match="already skipped"):
        skip_checkov(queue, "CKV_AWS_27", "again, with a reason long enough to pass")


@pytest.mark.parametrize("variant", ["aws", "cmk"])
@pytest.mark.parametrize("name", ["worker_high", "worker_long"])
def test_the_high_and_long_workers_pass_the_reserved_concurrency_check(reports, synth, variant, name):
    # Given the high and long workers' reserved concurrency (docs/decisions/0028) / When checkov scans
    # the template / Then CKV_AWS_115 passes on those functions (it is skipped, with its reason, on the
    # others)
    high = synth.logical_id(synth.stack.functions[name])
    results = reports[variant][0]["results"]
    passed = {c["resource"] for c in results["passed_checks"] if c["check_id"] == "CKV_AWS_115"}
    skipped = {c["resource"] for c in results["skipped_checks"] if c["check_id"] == "CKV_AWS_115"}
    assert f"AWS::Lambda::Function.{high}" in passed
    assert f"AWS::Lambda::Function.{high}" not in skipped
