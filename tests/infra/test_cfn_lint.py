"""cfn-lint (offline) finds no errors in the synthesized template (both encryption variants)."""

from __future__ import annotations

from cfnlint.api import lint

from tests.infra.conftest import lint_errors

REGIONS = ["us-east-1"]


def test_template_has_no_cfn_lint_errors(each_synth):
    template = each_synth.outdir / "Jobsched.template.json"
    errors = lint_errors(template.read_text(), REGIONS[0])
    assert errors == [], "\n".join(str(m) for m in errors)


def test_cfn_lint_reports_errors_it_finds():
    # Guard against a silently passing linter: a template with a bad property must yield an E-rule
    bad = '{"Resources": {"Q": {"Type": "AWS::SQS::Queue", "Properties": {"VisibilityTimeout": "x"}}}}'
    assert [m for m in lint(bad, regions=REGIONS) if m.rule.id.startswith("E")]
