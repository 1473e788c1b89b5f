"""Encryption at rest: AWS-owned/managed keys (``encryption=aws``) or one customer-managed key (``cmk``).

With ``aws`` (the default) every store is encrypted with keys AWS owns or manages at no charge: SSE-SQS
queues, DynamoDB's AWS-managed key, SSE-S3, CloudWatch Logs' own encryption, Lambda's AWS-managed key
for environment variables; checkov's "use a customer-managed key" checks are skipped on each resource
with the reason (:data:`AWS_KEY_REASONS`). With ``cmk`` the stack creates one KMS key with yearly
rotation (:func:`stack_key`) and every table, queue, DLQ, the bucket, every log group, every function's
environment and the alert topic use it. Principals get the key only through grants: CDK's own
(``grant_read_write_data``, ``grant_consume_messages``, ...), :func:`grant_send` for SQS producers,
``PayloadStore.grant_objects`` for the bucket; the two AWS services that write with the key by themselves
(CloudWatch Logs, CloudWatch alarms publishing to the topic) are named in the key policy.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sqs as sqs
from constructs import Construct

# checkov check -> why the AWS-owned/managed key is acceptable (encryption=aws only; cmk passes them).
AWS_KEY_REASONS = {
    "CKV_AWS_27": "Encrypted at rest with SSE-SQS (keys owned by SQS, no charge); a customer-managed "
    "KMS key is the deployment option encryption=cmk (docs/deploy.md).",
    "CKV_AWS_119": "Encrypted at rest with DynamoDB's AWS-managed KMS key (aws/dynamodb); a "
    "customer-managed key is the deployment option encryption=cmk (docs/deploy.md).",
    "CKV_AWS_158": "CloudWatch Logs encrypts every log group at rest with its own keys; a "
    "customer-managed KMS key is the deployment option encryption=cmk (docs/deploy.md).",
    "CKV_AWS_173": "Lambda encrypts environment variables at rest with its AWS-managed key; they hold "
    "resource names and settings, no secrets (CKV_AWS_45 passes). A customer-managed key is the "
    "deployment option encryption=cmk (docs/deploy.md).",
}

# What a producer needs on the key of a KMS-encrypted queue (SQS: GenerateDataKey, plus Decrypt to
# reuse a cached data key); a consumer needs kms:Decrypt, which CDK's grant_consume_messages gives.
SQS_PRODUCER_KEY_ACTIONS = ("kms:GenerateDataKey", "kms:Decrypt")
# CloudWatch Logs' documented actions for a key that encrypts log groups (key policy, one account).
LOGS_KEY_ACTIONS = ("kms:Encrypt*", "kms:Decrypt*", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:Describe*")


def stack_key(scope: Construct, construct_id: str, *, destroy: bool = False) -> kms.Key:
    """The deployment's one customer-managed key: rotated yearly, usable by CloudWatch Logs for this
    account's log groups in this region, retained with the data it protects unless ``destroy``."""
    key = kms.Key(
        scope,
        construct_id,
        description="jobsched: tables, queues, bucket, logs, function environments, alert topic",
        enable_key_rotation=True,
        # A deleted key makes the retained tables and bucket unreadable: keep it like them.
        removal_policy=cdk.RemovalPolicy.DESTROY if destroy else cdk.RemovalPolicy.RETAIN,
    )
    logs = iam.ServicePrincipal(
        f"logs.{cdk.Aws.REGION}.{cdk.Aws.URL_SUFFIX}",  # amazonaws.com.cn in the China regions
        conditions={
            "ArnLike": {
                "kms:EncryptionContext:aws:logs:arn": f"arn:{cdk.Aws.PARTITION}:logs:{cdk.Aws.REGION}:"
                f"{cdk.Aws.ACCOUNT_ID}:log-group:*"
            }
        },
    )
    key.grant(logs, *LOGS_KEY_ACTIONS)
    return key


def grant_send(queue: sqs.IQueue, grantee: iam.IGrantable) -> None:
    """Let ``grantee`` send to ``queue``; with a KMS-encrypted queue, also exactly the key actions a
    producer needs (:data:`SQS_PRODUCER_KEY_ACTIONS`).

    Only ``sqs:SendMessage`` (``SendMessageBatch`` is authorized as it): CDK's ``grant_send_messages``
    adds ``sqs:GetQueueAttributes`` and ``sqs:GetQueueUrl`` too, which no sender calls (the functions get
    queue URLs from their environment; the few that read a queue's depth are granted that on the queues
    they read: decision 0038), and ``kms:Encrypt``, ``kms:ReEncrypt*``, ``kms:GenerateDataKey*`` on the
    key, which SQS does not need.
    """
    queue.grant(grantee, "sqs:SendMessage")
    if queue.encryption_master_key is not None:
        queue.encryption_master_key.grant(grantee, *SQS_PRODUCER_KEY_ACTIONS)
