"""SQS queues ``high``, ``default``, ``low``, ``long`` and ``container``, each with its dead-letter queue.

Each queue redrives to its DLQ after ``max_receive_count`` receives, is encrypted (SSE-SQS, or the
stack's customer-managed key with ``encryption=cmk``: infra/encryption.py) and
refuses requests that are not over TLS. Visibility timeouts follow AWS's advice for Lambda event
sources: at least six times the consuming function's timeout, so a batch that is retried by Lambda
does not reappear on the queue while the first invocation is still running.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.encryption import AWS_KEY_REASONS, grant_send
from infra.nag import skip_checkov
from jobsched.runtime.resources import PRIORITIES, QUEUES, QueueSpec

VISIBILITY_FACTOR = 6
QUEUE_CONSUMER = "worker"  # the spec of the three worker functions (infra/workers.py): every Lambda queue
DLQ_CONSUMER = "dlq_consumer"  # consumes every DLQ


def encrypted_queue(scope: Construct, construct_id: str, *, key: kms.IKey | None, **props) -> sqs.Queue:
    """An SQS queue that refuses requests not over TLS, encrypted with ``key`` or else SSE-SQS."""
    if key is None:
        queue = sqs.Queue(
            scope, construct_id, encryption=sqs.QueueEncryption.SQS_MANAGED, enforce_ssl=True, **props
        )
        skip_checkov(queue, "CKV_AWS_27", AWS_KEY_REASONS["CKV_AWS_27"])
        return queue
    return sqs.Queue(
        scope,
        construct_id,
        encryption=sqs.QueueEncryption.KMS,
        encryption_master_key=key,
        enforce_ssl=True,
        **props,
    )


def visibility_timeout(consumer_timeout_seconds: int) -> int:
    """The visibility timeout for a queue whose consumer may run ``consumer_timeout_seconds``."""
    return min(VISIBILITY_FACTOR * consumer_timeout_seconds, 12 * 3600)  # SQS maximum: 12 hours


class Queues(Construct):
    """The four run queues and their DLQs; ``queue(kind)`` / ``dlq(kind)`` return them."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        consumer_timeout_seconds: int,
        dlq_consumer_timeout_seconds: int,
        key: kms.IKey | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self._key = key
        self._queues: dict[str, sqs.Queue] = {}
        self._dlqs: dict[str, sqs.Queue] = {}
        for spec in QUEUES:
            self._build(spec, consumer_timeout_seconds, dlq_consumer_timeout_seconds)

    def _build(self, spec: QueueSpec, consumer_timeout: int, dlq_consumer_timeout: int) -> None:
        name = spec.kind.title()
        dlq = encrypted_queue(
            self,
            f"{name}Dlq",
            key=self._key,
            retention_period=cdk.Duration.days(spec.dlq_retention_days),
            visibility_timeout=cdk.Duration.seconds(visibility_timeout(dlq_consumer_timeout)),
        )
        queue = encrypted_queue(
            self,
            name,
            key=self._key,
            retention_period=cdk.Duration.days(spec.retention_days),
            visibility_timeout=cdk.Duration.seconds(visibility_timeout(consumer_timeout)),
            dead_letter_queue=sqs.DeadLetterQueue(queue=dlq, max_receive_count=spec.max_receive_count),
        )
        self._queues[spec.kind] = queue
        self._dlqs[spec.kind] = dlq

    def queue(self, kind: str) -> sqs.Queue:
        return self._queues[kind]

    def dlq(self, kind: str) -> sqs.Queue:
        return self._dlqs[kind]

    def grant_send(self, kind: str, grantee: iam.IGrantable) -> None:
        """Let ``grantee`` send to the ``kind`` queue (and use its key, if any, as a producer)."""
        grant_send(self.queue(kind), grantee)

    @property
    def kinds(self) -> tuple[str, ...]:
        return tuple(self._queues)

    def environment(self, kinds: tuple[str, ...] = PRIORITIES, *, dlqs: bool = False) -> dict[str, str]:
        """``{env var: queue URL}`` for the given queue kinds, and their DLQs when ``dlqs``."""
        env: dict[str, str] = {}
        for spec in QUEUES:
            if spec.kind in kinds:
                env[spec.env_var] = self.queue(spec.kind).queue_url
                if dlqs:
                    env[spec.dlq_env_var] = self.dlq(spec.kind).queue_url
        return env
