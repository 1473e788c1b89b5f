"""The S3 bucket for large payloads and outputs.

Private (all public access blocked), encrypted (SSE-S3), reachable only over TLS, and self-cleaning:
objects expire ``retention_days`` after they were written (the deployment's one retention setting,
which also sets the Runs table TTL, :data:`jobsched.runtime.resources.ENV_RETENTION_DAYS`) and
incomplete multipart uploads after a day.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from constructs import Construct

from infra.nag import acknowledge


class PayloadStore(Construct):
    """``bucket``: where payloads over the inline limit and large run outputs live."""

    def __init__(
        self, scope: Construct, construct_id: str, *, retention_days: int, destroy: bool = False
    ) -> None:
        super().__init__(scope, construct_id)
        self.bucket = s3.Bucket(
            self,
            "Bucket",
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            lifecycle_rules=[
                s3.LifecycleRule(
                    id="expire-payloads-and-outputs",
                    expiration=cdk.Duration.days(retention_days),
                    abort_incomplete_multipart_upload_after=cdk.Duration.days(1),
                )
            ],
            removal_policy=cdk.RemovalPolicy.DESTROY if destroy else cdk.RemovalPolicy.RETAIN,
            auto_delete_objects=False,
        )
        acknowledge(
            self.bucket,
            "AwsSolutions-S1",
            "Only the jobsched functions read and write this bucket, under their own roles; "
            "their requests are traced (X-Ray) and logged per run. Server access logs would need a "
            "second bucket and duplicate that record at extra cost.",
        )

    def grant_objects(self, function: lambda_.Function, *actions: str) -> None:
        """Let ``function`` perform exactly ``actions`` (e.g. ``s3:GetObject``) on the bucket's objects.

        Explicit actions instead of CDK's ``grant_read``/``grant_read_write``, which add wildcard actions
        (``s3:GetObject*``, ``s3:List*``, ...) that the functions do not use.
        """
        if not actions or any("*" in action for action in actions):
            raise ValueError(f"name the S3 actions explicitly, got {actions!r}")
        function.add_to_role_policy(
            iam.PolicyStatement(actions=list(actions), resources=[self.bucket.arn_for_objects("*")])
        )
        logical_id = cdk.Stack.of(self).resolve(self.bucket.node.default_child.logical_id)  # type: ignore[union-attr]
        acknowledge(
            function.role,  # type: ignore[arg-type]
            f"AwsSolutions-IAM5[Resource::<{logical_id}.Arn>/*]",
            "Payloads and outputs are objects under run-specific keys created at run time, so object "
            "actions apply to '<bucket ARN>/*' of this one bucket; the actions are listed explicitly.",
        )
