"""Synthesize the jobsched app once per test session and share the result.

Synthesis (bundling, jsii, cdk-nag) takes seconds, so every infra test reads the same cloud
assembly. A cdk-nag validation failure does not abort the session: it is recorded and reported by
``test_nag.py``, while the template tests still run on the written template. ``cmk_synth`` is the
same app with ``encryption=cmk`` (one customer-managed key), checked by cdk-nag, cfn-lint and checkov
like the default.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

import aws_cdk as cdk
from aws_cdk import assertions

from jobsched.local.iam import recorder

STACK = "Jobsched"
SYNTHESIZING = {"synth", "cmk_synth", "each_synth", "variant"}  # fixtures that synthesize an app
NOTIFY_TOPIC_ARNS = "arn:aws:sns:us-east-1:123456789012:team-*"
SYNTH_GROUP = "tests/infra"  # the xdist group of every test that reads a synthesized app
#: The user's own tags of the ``cmk_synth`` app (``-c tags=...``, infra/tags.py).
USER_TAGS = '{"team": "payments", "cost-center": "42"}'
#: The most container tasks the capacity function keeps warm in both synthesized apps.
WARM_TASKS = 4
#: The most provisioned concurrency on the worker's alias in the ``cmk_synth`` app.
MAX_PROVISIONED = 25
SYNTH_CONTEXT = {"notify_topic_arns": NOTIFY_TOPIC_ARNS, "capacity_max_warm_tasks": str(WARM_TASKS)}


@dataclass(frozen=True)
class Synth:
    outdir: Path
    template: dict[str, Any]
    assertions: assertions.Template
    stack: Any  # infra.stack.JobschedStack
    validation_error: str | None

    def resources(self, type_name: str) -> dict[str, dict[str, Any]]:
        """``{logical id: resource}`` of every resource of ``type_name``."""
        return {k: v for k, v in self.template["Resources"].items() if v["Type"] == type_name}

    def logical_id(self, construct: Any) -> str:
        """The logical id of an L2 construct's CloudFormation resource."""
        return self.stack.resolve(construct.node.default_child.logical_id)

    @property
    def asset_dir(self) -> Path:
        """The bundled Lambda code asset (every function shares it)."""
        keys = {fn["Properties"]["Code"]["S3Key"] for fn in self.resources("AWS::Lambda::Function").values()}
        assert len(keys) == 1, f"functions use {len(keys)} code assets, expected one shared asset"
        return self.outdir / f"asset.{keys.pop().removesuffix('.zip')}"


@pytest.fixture(scope="session")
def synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    from app import build_app

    outdir = tmp_path_factory.mktemp("cdk.out")
    # A notify topic allow-list with a wildcard, so cdk-nag and cfn-lint see the sns:Publish grants; warm
    # container tasks, so they and tests/infra/test_permissions_by_use.py see the capacity function's
    # scalable-target grants (infra/capacity.py).
    app = build_app(cdk.App(outdir=str(outdir), context=SYNTH_CONTEXT))
    return _kept("synth", _synthesize(app, outdir))


@pytest.fixture(scope="session")
def cmk_synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """The app with ``-c encryption=cmk``, cdk-nag included; inline code instead of the bundled asset
    (the code is not what this variant changes, and bundling twice costs a minute)."""
    from aws_cdk import aws_lambda as lambda_
    from cdk_nag import AwsSolutionsChecks

    from infra.config import StackConfig
    from infra.stack import JobschedStack

    outdir = tmp_path_factory.mktemp("cdk.out.cmk")
    # with the user's own tags too (infra/tags.py), so cdk-nag, cfn-lint and checkov see them
    # and provisioned concurrency on the worker's alias (the alias, its version and the grants on it)
    context = {
        **SYNTH_CONTEXT,
        "encryption": "cmk",
        "tags": USER_TAGS,
        "capacity_max_provisioned": str(MAX_PROVISIONED),
    }
    app = cdk.App(outdir=str(outdir), context=context)
    config = StackConfig.from_context(app.node.try_get_context)
    JobschedStack(app, STACK, config=config, code=lambda_.Code.from_inline("def handler(e, c): pass"))
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))  # type: ignore[attr-defined]
    return _kept("cmk_synth", _synthesize(app, outdir))


#: Under the session's ``IAM_CALLS_DIR``: the templates the ``synth`` and ``cmk_synth`` fixtures made.
KEPT_TEMPLATES = "templates"


def kept_template_path(variant: str) -> Path:
    """Where this run's ``variant`` template (``synth`` or ``cmk_synth``) is kept."""
    return Path(os.environ[recorder.ENV_CALLS_DIR]) / KEPT_TEMPLATES / f"{variant}.template.json"


def _kept(variant: str, synthesized: Synth) -> Synth:
    """Keep the template under the run's recording directory: ``make test`` runs the permissions check
    (tests/infra/test_permissions_by_use.py) alone after every other test, on that directory, and it
    judges the calls against these templates instead of synthesizing both variants again (about 8 s
    of a jsii runtime with nothing beside it; decision 0044, twelfth pass). A session with a directory
    of its own (any other run) keeps them where no later session looks."""
    path = kept_template_path(variant)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(synthesized.template), encoding="utf-8")
    return synthesized


@pytest.fixture(params=["synth", "cmk_synth"], ids=["encryption=aws", "encryption=cmk"])
def each_synth(request: pytest.FixtureRequest) -> Synth:
    """Both encryption variants, for the checks each must pass (cdk-nag, cfn-lint, checkov)."""
    return request.getfixturevalue(request.param)


def _synthesize(app: cdk.App, outdir: Path) -> Synth:
    error = None
    try:
        app.synth()
    except RuntimeError as exc:  # cdk-nag findings surface as a jsii ValidationFailed error
        if "ValidationFailed" not in str(exc):
            raise
        error = str(exc)
    template = json.loads((outdir / f"{STACK}.template.json").read_text())
    return Synth(
        outdir=outdir,
        template=template,
        assertions=assertions.Template.from_json(template),
        stack=app.node.find_child(STACK),
        validation_error=error,
    )


def lint_errors(template_text: str, region: str = "us-east-1") -> list[Any]:
    """cfn-lint's errors (E rules, offline) for ``template_text`` deployed in ``region``.

    The state machine's SQS integrations name their partition through a definition substitution
    (``arn:${Partition}:states:::sqs:sendMessage``, infra/long_jobs.py); cfn-lint validates the
    definition before substitution with a schema whose resource pattern knows only ``arn:aws:``, so
    the placeholder is read as the commercial partition for linting. What the partition becomes is
    checked by tests/infra/test_environments.py."""
    from cfnlint.api import lint

    from infra.long_jobs import PARTITION_PLACEHOLDER

    text = template_text.replace("arn:${" + PARTITION_PLACEHOLDER + "}:", "arn:aws:")
    return [m for m in lint(text, regions=[region]) if m.rule.id.startswith("E")]


@pytest.hookimpl(tryfirst=True)  # before tests/conftest.py gives each test its xdist group
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the tests that synthesize an app as ``slow`` (``-m "not slow"`` skips them), and put them
    in one xdist group: the session's two synthesized apps are then built once, on one worker."""
    here = Path(__file__).parent
    for item in items:
        if item.path.is_relative_to(here) and SYNTHESIZING & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
            item.add_marker(pytest.mark.xdist_group(SYNTH_GROUP))
