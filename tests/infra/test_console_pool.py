"""``-c console_user_pool=true``: the console's Cognito user pool, the API's authorizer on it, and
cdk-nag on that variant (docs/deploy.md, "The console"). Inline code: only the pool and the API differ
from the main synthesis."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_lambda as lambda_

from infra.config import ConfigError, StackConfig
from infra.stack import JobschedStack
from jobsched.api.auth import ENV_JWT_TENANT_CLAIM
from jobsched.console import ENV_CONSOLE_COGNITO_CLIENT_ID, ENV_CONSOLE_COGNITO_REGION

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def pooled(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path, str | None]:
    from cdk_nag import AwsSolutionsChecks

    outdir = tmp_path_factory.mktemp("cdk.out.console")
    app = cdk.App(outdir=str(outdir), context={"auth_mode": "jwt", "console_user_pool": "true"})
    config = StackConfig.from_context(app.node.try_get_context)
    JobschedStack(app, "Console", config=config, code=lambda_.Code.from_inline("def handler(e, c): pass"))
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))  # type: ignore[attr-defined]
    error = None
    try:
        app.synth()
    except RuntimeError as exc:
        if "ValidationFailed" not in str(exc):
            raise
        error = str(exc)
    return json.loads((outdir / "Console.template.json").read_text()), outdir, error


def _of_type(template: dict[str, Any], type_name: str) -> list[dict[str, Any]]:
    return [r for r in template["Resources"].values() if r["Type"] == type_name]


def test_the_pool_admits_no_self_sign_up_and_holds_a_tenant_attribute(pooled):
    """Given console_user_pool=true, Then one user pool exists: administrators create users, each
    with a custom tenant attribute."""
    (pool,) = _of_type(pooled[0], "AWS::Cognito::UserPool")
    props = pool["Properties"]
    assert props["AdminCreateUserConfig"]["AllowAdminCreateUserOnly"] is True
    assert {"Name": "tenant", "AttributeDataType": "String", "Mutable": True} | {
        "StringAttributeConstraints": {"MinLength": "1", "MaxLength": "128"}
    } in props["Schema"]


def test_the_console_client_reads_but_cannot_write_the_tenant(pooled):
    """Then the console's app client has no secret, signs in with a password (or SRP), has no OAuth
    flow, and may read custom:tenant but not write it (a user cannot change tenant)."""
    (client,) = _of_type(pooled[0], "AWS::Cognito::UserPoolClient")
    props = client["Properties"]
    assert props["GenerateSecret"] is False
    assert set(props["ExplicitAuthFlows"]) >= {"ALLOW_USER_PASSWORD_AUTH", "ALLOW_USER_SRP_AUTH"}
    assert "AllowedOAuthFlows" not in props
    assert "custom:tenant" in props["ReadAttributes"]
    assert "custom:tenant" not in props["WriteAttributes"]


def test_the_api_accepts_the_pools_tokens_and_reads_the_tenant_claim(pooled):
    """Then the API's authorizer is a JWT authorizer whose issuer is the pool and audience the
    console's client; the api function reads custom:tenant and knows the client and region."""
    template = pooled[0]
    (authorizer,) = _of_type(template, "AWS::ApiGatewayV2::Authorizer")
    jwt = authorizer["Properties"]["JwtConfiguration"]
    assert "cognito-idp." in json.dumps(jwt["Issuer"])
    assert len(jwt["Audience"]) == 1 and "Ref" in jwt["Audience"][0]
    routes = {
        r["Properties"]["RouteKey"]: r["Properties"] for r in _of_type(template, "AWS::ApiGatewayV2::Route")
    }
    assert routes["ANY /{proxy+}"]["AuthorizationType"] == "JWT"
    assert routes["GET /ui"]["AuthorizationType"] == "NONE"
    api_env = [
        f["Properties"]["Environment"]["Variables"]
        for f in _of_type(template, "AWS::Lambda::Function")
        if ENV_CONSOLE_COGNITO_CLIENT_ID in f["Properties"].get("Environment", {}).get("Variables", {})
    ]
    assert len(api_env) == 1
    assert api_env[0]["JOBSCHED_AUTH_MODE"] == "jwt"
    assert api_env[0][ENV_JWT_TENANT_CLAIM] == "custom:tenant"
    assert api_env[0][ENV_CONSOLE_COGNITO_CLIENT_ID] == jwt["Audience"][0]
    assert api_env[0][ENV_CONSOLE_COGNITO_REGION] == {"Ref": "AWS::Region"}
    outputs = template["Outputs"]
    assert {"ConsoleUrl", "ConsoleUserPoolId", "ConsoleClientId"} <= set(outputs)


def test_the_variant_passes_cdk_nag_with_reasons(pooled):
    """Then cdk-nag reports no unacknowledged finding; the pool's acknowledgements (MFA optional, no
    Plus plan) are the only new ones."""
    _, outdir, error = pooled
    assert error is None, error
    report = json.loads((outdir / "validation-report.json").read_text())
    (plugin,) = [p for p in report["pluginReports"] if p["pluginName"] == "AwsSolutions"]
    assert plugin["violations"] == []
    rules = {f["ruleName"].split("[")[0] for f in plugin["suppressedViolations"]}
    assert "AwsSolutions-COG2" in rules
    assert rules <= {
        "AwsSolutions-IAM5",
        "AwsSolutions-S1",
        "AwsSolutions-SQS3",
        "AwsSolutions-APIG4",
        "AwsSolutions-ECS2",  # the container pool's (tests/infra/test_nag.py)
        "AwsSolutions-VPC7",
        "AwsSolutions-COG2",
        "AwsSolutions-COG3",
        "AwsSolutions-COG8",
    }


@pytest.mark.parametrize(
    ("context", "message"),
    [
        ({"console_user_pool": "true"}, "needs auth_mode=jwt"),
        (
            {"console_user_pool": "true", "auth_mode": "jwt", "jwt_issuer": "https://x", "jwt_audience": "a"},
            "leave jwt_issuer and jwt_audience unset",
        ),
        ({"console_user_pool": "true", "auth_mode": "jwt", "jwt_tenant_claim": "org"}, "custom:tenant"),
    ],
)
def test_contradictory_settings_are_refused_with_their_names(context, message):
    """Given console_user_pool with IAM auth or its own issuer or claim, Then the config says what to fix."""
    with pytest.raises(ConfigError, match=message):
        StackConfig.from_context(context.get)
