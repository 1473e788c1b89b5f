"""The HTTP API: API Gateway HTTP API in front of the ``api`` function.

Every route but ``GET /health``, ``/`` (a redirect to ``/docs``), ``/docs`` and ``/openapi.json`` needs
an identity: IAM (SigV4) by default, or a JWT authorizer when the deployment sets ``auth_mode=jwt``.
The ``$default`` stage writes JSON access logs and throttles. The tenant is resolved by the function
from the authenticated identity, never from the request.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import aws_cdk as cdk
import jsii
from aws_cdk import aws_apigateway as apigw_v1
from aws_cdk import aws_apigatewayv2 as apigw
from aws_cdk import aws_apigatewayv2_authorizers as authorizers
from aws_cdk import aws_apigatewayv2_integrations as integrations
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.config import StackConfig
from infra.console import TENANT_CLAIM, ConsoleUserPool
from infra.functions import function_spec, make_function, make_log_group
from infra.nag import acknowledge
from infra.queues import Queues
from infra.storage import PayloadStore
from infra.tables import Tables
from jobsched.api.auth import ENV_ADMIN_PRINCIPALS, ENV_JWT_TENANT_CLAIM
from jobsched.api.gate import PUBLIC_PATHS
from jobsched.console import CONSOLE_PATH, ENV_CONSOLE_COGNITO_CLIENT_ID, ENV_CONSOLE_COGNITO_REGION
from jobsched.runtime.resources import (
    BACKPRESSURE_PRIORITIES,
    ENV_AUTH_MODE,
    ENV_RUN_LOG_GROUP,
    JOBS_TABLE,
    LEASES_TABLE,
    RUNS_TABLE,
)

ACCESS_LOG_FORMAT = {
    "requestId": "$context.requestId",
    "ip": "$context.identity.sourceIp",
    "requestTime": "$context.requestTime",
    "method": "$context.httpMethod",
    "routeKey": "$context.routeKey",
    "path": "$context.path",
    "status": "$context.status",
    "protocol": "$context.protocol",
    "responseLength": "$context.responseLength",
    "latencyMs": "$context.responseLatency",
    "userArn": "$context.identity.userArn",
    "authorizerError": "$context.authorizer.error",
    "integrationError": "$context.integrationErrorMessage",
}


class Api(Construct):
    """``function`` (the api Lambda) and ``http_api`` with its ``url``."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        code: lambda_.Code,
        config: StackConfig,
        environment: Mapping[str, str],
        tables: Tables,
        queues: Queues,
        payloads: PayloadStore,
        key: kms.IKey | None = None,
        run_log_group: str | None = None,
        console_pool: ConsoleUserPool | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        console_env = {}
        if console_pool is not None:
            console_env = {
                ENV_CONSOLE_COGNITO_CLIENT_ID: console_pool.client.user_pool_client_id,
                ENV_CONSOLE_COGNITO_REGION: cdk.Stack.of(self).region,
            }
        self.function = make_function(
            self,
            function_spec("api"),
            code=code,
            config=config,
            key=key,
            environment={
                **environment,
                ENV_AUTH_MODE: config.auth_mode,
                ENV_ADMIN_PRINCIPALS: ",".join(config.admin_principals),
                ENV_JWT_TENANT_CLAIM: TENANT_CLAIM if console_pool is not None else config.jwt_tenant_claim,
                **console_env,
                # the worker's log group, named in the run view (logs.log_group) with a Logs Insights query
                **({ENV_RUN_LOG_GROUP: run_log_group} if run_log_group else {}),
            },
        )
        for spec in (JOBS_TABLE, RUNS_TABLE, LEASES_TABLE):
            tables.table(spec).grant_read_write_data(self.function)
        for kind in queues.kinds:  # run now, replay dead letters: to the run's pool's queue
            queues.grant_send(kind, self.function)
        for kind in BACKPRESSURE_PRIORITIES:  # a job run now is dispatched with the dispatcher's backpressure
            queues.queue(kind).grant(self.function, "sqs:GetQueueAttributes")
        payloads.grant_objects(self.function, "s3:GetObject")  # run outputs stored in S3

        if console_pool is not None:
            # The pool's ID tokens for the console's app client (their aud is the client id).
            authorizer: apigw.IHttpRouteAuthorizer = authorizers.HttpUserPoolAuthorizer(
                "ConsoleUsers", console_pool.user_pool, user_pool_clients=[console_pool.client]
            )
        elif config.auth_mode == "jwt":
            authorizer = authorizers.HttpJwtAuthorizer(
                "Jwt", config.jwt_issuer or "", jwt_audience=list(config.jwt_audience)
            )
        else:
            authorizer = authorizers.HttpIamAuthorizer()
        self.http_api = apigw.HttpApi(
            self,
            "HttpApi",
            description="jobsched HTTP API",
            create_default_stage=False,
            default_authorizer=authorizer,
        )
        integration = integrations.HttpLambdaIntegration("Api", self.function)
        self.http_api.add_routes(path="/{proxy+}", methods=[apigw.HttpMethod.ANY], integration=integration)
        # The same public paths as the function's own gate (jobsched.api.gate.PUBLIC_PATHS): the liveness
        # probe and the API's documentation, none of which reads tenant data.
        # The console's static files (/ui and below) are public too: they hold no tenant data; the
        # console calls the API with the signed-in user's token (jobsched.api.routes.console).
        for path in sorted({*PUBLIC_PATHS, CONSOLE_PATH, CONSOLE_PATH + "/{proxy+}"}):
            for route in self.http_api.add_routes(
                path=path,
                methods=[apigw.HttpMethod.GET],
                integration=integration,
                authorizer=apigw.HttpNoneAuthorizer(),
            ):
                acknowledge(
                    route,
                    "AwsSolutions-APIG4",
                    f"GET {path} is public (liveness probe, the API's own OpenAPI document / Swagger UI, "
                    "the root's redirect to it, or the operator console's static files); it reads no "
                    "tenant data. "
                    "Every other route requires IAM or JWT.",
                )
        access_logs = make_log_group(self, "AccessLogs", config=config, key=key)
        self.stage = apigw.HttpStage(
            self,
            "DefaultStage",
            http_api=self.http_api,
            stage_name="$default",
            auto_deploy=True,
            access_log_settings=_AccessLogs(access_logs),
            throttle=apigw.ThrottleSettings(
                rate_limit=config.api_rate_limit, burst_limit=config.api_burst_limit
            ),
        )
        self.url = self.stage.url


@jsii.implements(apigw.IAccessLogSettings)
class _AccessLogs:
    """Access log settings for the stage: JSON lines (``ACCESS_LOG_FORMAT``) into ``log_group``."""

    def __init__(self, log_group: logs.ILogGroup) -> None:
        self._destination = apigw.LogGroupLogDestination(log_group)
        self._format = apigw_v1.AccessLogFormat.custom(json.dumps(ACCESS_LOG_FORMAT))

    @property
    def destination(self) -> apigw.IAccessLogDestination:
        return self._destination

    @property
    def format(self) -> apigw_v1.AccessLogFormat:
        return self._format
