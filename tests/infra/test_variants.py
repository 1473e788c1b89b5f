"""Context variants: JWT auth and an alert email. Synthesized with inline code (no bundling) and
without cdk-nag, since only the API and the topic differ from the main synthesis."""

from __future__ import annotations

import aws_cdk as cdk
import pytest
from aws_cdk import assertions
from aws_cdk import aws_lambda as lambda_

from infra.config import StackConfig
from infra.stack import JobschedStack


@pytest.fixture(scope="module")
def variant() -> assertions.Template:
    app = cdk.App()
    config = StackConfig(
        auth_mode="jwt",
        jwt_issuer="https://issuer.example.com/",
        jwt_audience=("jobsched",),
        alert_email="oncall@example.com",
        shards=2,
        admin_principals=("arn:aws:iam::123456789012:role/admin", "arn:aws:iam::123456789012:role/ops"),
        jwt_tenant_claim="org",
    )
    stack = JobschedStack(
        app, "Variant", config=config, code=lambda_.Code.from_inline("def handler(e, c): pass")
    )
    return assertions.Template.from_stack(stack)


def test_jwt_mode_puts_a_jwt_authorizer_on_the_api(variant):
    variant.has_resource_properties(
        "AWS::ApiGatewayV2::Authorizer",
        {
            "AuthorizerType": "JWT",
            "JwtConfiguration": {"Issuer": "https://issuer.example.com/", "Audience": ["jobsched"]},
        },
    )
    variant.has_resource_properties(
        "AWS::ApiGatewayV2::Route", {"RouteKey": "ANY /{proxy+}", "AuthorizationType": "JWT"}
    )


def test_jwt_mode_tells_the_api_function(variant):
    variant.has_resource_properties(
        "AWS::Lambda::Function",
        {"Environment": {"Variables": assertions.Match.object_like({"JOBSCHED_AUTH_MODE": "jwt"})}},
    )


def test_api_function_gets_the_admin_principals_and_the_tenant_claim(variant):
    from jobsched.api.auth import ENV_ADMIN_PRINCIPALS, ENV_JWT_TENANT_CLAIM

    expected = {
        ENV_ADMIN_PRINCIPALS: "arn:aws:iam::123456789012:role/admin,arn:aws:iam::123456789012:role/ops",
        ENV_JWT_TENANT_CLAIM: "org",
    }
    variant.has_resource_properties(
        "AWS::Lambda::Function", {"Environment": {"Variables": assertions.Match.object_like(expected)}}
    )


def test_alert_email_subscribes_to_the_topic(variant):
    variant.has_resource_properties(
        "AWS::SNS::Subscription", {"Protocol": "email", "Endpoint": "oncall@example.com"}
    )


def test_shard_count_sets_the_number_of_ticks(variant):
    # 2 shards -> 2 ticks + the sweeper's schedule + the capacity function's (infra/capacity.py)
    variant.resource_count_is("AWS::Scheduler::Schedule", 4)


def test_handler_modules_reach_every_function():
    # Given a deployment that names its own handler modules in context
    app = cdk.App()
    config = StackConfig.from_context({"handler_modules": "handlers.billing, handlers.reports"}.get)
    stack = JobschedStack(
        app, "Handlers", config=config, code=lambda_.Code.from_inline("def handler(e, c): pass")
    )
    # Then every function (the API validates names with them, the worker runs them) gets the list
    functions = assertions.Template.from_stack(stack).find_resources("AWS::Lambda::Function")
    ours = [f for f in functions.values() if "JOBSCHED_JOBS_TABLE" in str(f)]
    assert ours
    for function in ours:
        variables = function["Properties"]["Environment"]["Variables"]
        assert variables["JOBSCHED_HANDLER_MODULES"] == "handlers.billing,handlers.reports"
