"""The S3 bucket for large payloads and outputs.

Private (all public access blocked), encrypted (SSE-S3, or SSE-KMS with the stack's customer-managed
key and an S3 Bucket Key with ``encryption=cmk``), reachable only over TLS, and self-cleaning:
objects expire ``retention_days`` after they were written (the deployment's one retention setting,
which also sets the Runs table TTL, :data:`jobsched.runtime.resources.ENV_RETENTION_DAYS`) and
incomplete multipart uploads after a day. Neither versioning nor server access logs: the reasons are
the checkov skips below (and docs/deploy.md).
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from constructs import Construct

from infra.nag import acknowledge, skip_checkov

ACCESS_LOGS_REASON = (
    "Only the jobsched functions read and write this bucket, under their own roles; "
    "their requests are traced (X-Ray) and logged per run. Server access logs would need a "
    "second bucket and duplicate that record at extra cost."
)
VERSIONING_REASON = (
    "Objects are written under run- and attempt-specific keys (outputs/<tenant>/<job>/<run>/"
    "attempt-<n>.json, payloads/<tenant>/<job>/<run>/<label>.json), no role may delete objects, and "
    "the lifecycle rule deleting them after retention_days is the intent; versioning would keep each "
    "expired object as a noncurrent version, so retention would no longer delete anything."
)
# The key actions each object action needs on an SSE-KMS bucket.
_KEY_ACTIONS = {"s3:GetObject": ("kms:Decrypt",), "s3:PutObject": ("kms:GenerateDataKey", "kms:Decrypt")}


class PayloadStore(Construct):
    """``bucket``: where payloads over the inline limit and large run outputs live."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        retention_days: int,
        destroy: bool = False,
        key: kms.IKey | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.bucket = s3.Bucket(
            self,
            "Bucket",
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            encryption=s3.BucketEncryption.KMS if key else s3.BucketEncryption.S3_MANAGED,
            encryption_key=key,
            bucket_key_enabled=bool(key),  # one data key per bucket and period: fewer KMS requests
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
        acknowledge(self.bucket, "AwsSolutions-S1", ACCESS_LOGS_REASON)
        skip_checkov(self.bucket, "CKV_AWS_18", ACCESS_LOGS_REASON)
        skip_checkov(self.bucket, "CKV_AWS_21", VERSIONING_REASON)

    def grant_objects(self, function: lambda_.Function | iam.Role, *actions: str) -> None:
        """Let ``function`` (or a role: the container pool's task role) perform exactly ``actions``
        (e.g. ``s3:GetObject``) on the bucket's objects.

        Explicit actions instead of CDK's ``grant_read``/``grant_read_write``, which add wildcard actions
        (``s3:GetObject*``, ``s3:List*``, ...) that the functions do not use. With a KMS-encrypted
        bucket, the function also gets exactly the key actions those object actions need.
        """
        if not actions or any(action not in _KEY_ACTIONS for action in actions):
            raise ValueError(f"name the S3 actions explicitly ({sorted(_KEY_ACTIONS)}), got {actions!r}")
        iam.Grant.add_to_principal(
            grantee=function, actions=list(actions), resource_arns=[self.bucket.arn_for_objects("*")]
        )
        if self.bucket.encryption_key is not None:
            key_actions = dict.fromkeys(a for action in actions for a in _KEY_ACTIONS[action])
            self.bucket.encryption_key.grant(function, *key_actions)
        logical_id = cdk.Stack.of(self).resolve(self.bucket.node.default_child.logical_id)  # type: ignore[union-attr]
        acknowledge(
            function.role if isinstance(function, lambda_.Function) else function,  # type: ignore[arg-type]
            f"AwsSolutions-IAM5[Resource::<{logical_id}.Arn>/*]",
            "Payloads and outputs are objects under run-specific keys created at run time, so object "
            "actions apply to '<bucket ARN>/*' of this one bucket; the actions are listed explicitly.",
        )
