"""HTTP API: IAM authorizer on every route but /health, access logs, throttling."""

from __future__ import annotations

import json

from infra.api import ACCESS_LOG_FORMAT


def _routes(synth) -> dict[str, dict]:
    return {
        r["Properties"]["RouteKey"]: r["Properties"]
        for r in synth.resources("AWS::ApiGatewayV2::Route").values()
    }


def test_one_http_api(synth):
    synth.assertions.resource_count_is("AWS::ApiGatewayV2::Api", 1)
    (api,) = synth.resources("AWS::ApiGatewayV2::Api").values()
    assert api["Properties"]["ProtocolType"] == "HTTP"


def test_every_route_but_health_and_the_docs_requires_iam(synth):
    routes = _routes(synth)
    assert routes["ANY /{proxy+}"]["AuthorizationType"] == "AWS_IAM"
    assert routes["GET /health"]["AuthorizationType"] == "NONE"
    assert routes["GET /docs"]["AuthorizationType"] == "NONE"
    assert routes["GET /openapi.json"]["AuthorizationType"] == "NONE"
    assert routes["GET /"]["AuthorizationType"] == "NONE"  # the redirect to /docs (issue 11)
    assert routes["GET /ui"]["AuthorizationType"] == "NONE"  # the console's static files (issue 15)
    assert routes["GET /ui/{proxy+}"]["AuthorizationType"] == "NONE"
    assert set(routes) == {
        "ANY /{proxy+}",
        "GET /",
        "GET /health",
        "GET /docs",
        "GET /openapi.json",
        "GET /ui",
        "GET /ui/{proxy+}",
    }


def test_default_stage_writes_json_access_logs(synth):
    (stage,) = synth.resources("AWS::ApiGatewayV2::Stage").values()
    settings = stage["Properties"]["AccessLogSettings"]
    assert json.loads(settings["Format"]) == ACCESS_LOG_FORMAT
    assert "Fn::GetAtt" in settings["DestinationArn"]


def test_the_access_log_format_holds_no_header_query_or_body():
    """The API Gateway access log records who, what route and how it went only (a security property
    of docs/api.md, "Security"; moved here from tests/api/test_security.py: it reads infra/)."""
    fields = " ".join(ACCESS_LOG_FORMAT.values()).lower()
    for leak in ("authorization", "header", "querystring", "body", "jwt.claims"):
        assert leak not in fields, leak


def test_default_stage_throttles(synth):
    (stage,) = synth.resources("AWS::ApiGatewayV2::Stage").values()
    config = synth.stack.config
    assert stage["Properties"]["StageName"] == "$default"
    assert stage["Properties"]["DefaultRouteSettings"] == {
        "ThrottlingBurstLimit": config.api_burst_limit,
        "ThrottlingRateLimit": config.api_rate_limit,
    }


def test_api_function_knows_the_auth_mode(synth):
    from jobsched.runtime.resources import ENV_AUTH_MODE

    fn = synth.template["Resources"][synth.logical_id(synth.stack.api.function)]["Properties"]
    assert fn["Environment"]["Variables"][ENV_AUTH_MODE] == "iam"


def test_the_api_function_names_the_workers_log_group_for_the_run_view(synth):
    """Given the stack, Then the api function's JOBSCHED_RUN_LOG_GROUP is the worker function's log
    group (a reference to it), which GET /runs/{id} names in logs.log_group."""
    from jobsched.runtime.resources import ENV_RUN_LOG_GROUP

    api = synth.stack.api.function
    (props,) = [
        r["Properties"]
        for lid, r in synth.resources("AWS::Lambda::Function").items()
        if lid == synth.logical_id(api)
    ]
    worker_logs = synth.stack.resolve(synth.stack.workers.worker.log_group.node.default_child.logical_id)
    assert props["Environment"]["Variables"][ENV_RUN_LOG_GROUP] == {"Ref": worker_logs}
