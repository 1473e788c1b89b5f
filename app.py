#!/usr/bin/env python3
"""CDK entry point: read the deployment settings from context, build the stack, check it, synth.

``python app.py`` (``make synth``) or ``cdk synth``/``cdk deploy -c shards=8 ...``; the settings and
their defaults are in infra/config.py and docs/deploy.md. cdk-nag's AwsSolutions rules run on every
synth: a finding that is not acknowledged with a reason is an error.
"""

from __future__ import annotations

import os

import aws_cdk as cdk
from aws_cdk import aws_lambda as lambda_
from cdk_nag import AwsSolutionsChecks

from infra.config import StackConfig
from infra.stack import JobschedStack


def build_app(app: cdk.App | None = None, *, code: lambda_.Code | None = None) -> cdk.App:
    """Create (or fill) ``app`` with the jobsched stack and the cdk-nag checks; return it.

    The stack is bound to ``CDK_DEFAULT_ACCOUNT``/``CDK_DEFAULT_REGION`` when the account is set (the
    CDK CLI sets both from the credentials), else environment-agnostic. ``code`` replaces the bundled
    asset (tests of what does not depend on the code)."""
    # `cdk` sets CDK_OUTDIR; `python app.py` (make synth) writes to ./cdk.out like the CLI would.
    app = app or cdk.App(outdir=None if os.environ.get("CDK_OUTDIR") else "cdk.out")
    config = StackConfig.from_context(app.node.try_get_context)
    env = None
    if os.environ.get("CDK_DEFAULT_ACCOUNT"):
        env = cdk.Environment(
            account=os.environ["CDK_DEFAULT_ACCOUNT"], region=os.environ.get("CDK_DEFAULT_REGION")
        )
    stack_name = app.node.try_get_context("stack_name") or "Jobsched"
    JobschedStack(
        app, stack_name, config=config, env=env, code=code, description="jobsched: serverless job scheduler"
    )
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))  # type: ignore[attr-defined]
    return app


if __name__ == "__main__":
    build_app().synth()
