"""cfn-lint (offline) finds no errors in the synthesized template (both encryption variants)."""

from __future__ import annotations

from cfnlint.api import lint

REGIONS = ["us-east-1"]


def test_template_has_no_cfn_lint_errors(each_synth):
    template = each_synth.outdir / "Jobsched.template.json"
    matches = lint(template.read_text(), regions=REGIONS)
    errors = [m for m in matches if m.rule.id.startswith("E")]
    assert errors == [], "\n".join(str(m) for m in errors)


def test_cfn_lint_reports_errors_it_finds():
    # Guard against a silently passing linter: a template with a bad property must yield an E-rule
    bad = '{"Resources": {"Q": {"Type": "AWS::SQS::Queue", "Properties": {"VisibilityTimeout": "x"}}}}'
    assert [m for m in lint(bad, regions=REGIONS) if m.rule.id.startswith("E")]
