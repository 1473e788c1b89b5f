"""``encryption=cmk``: one customer-managed key, used by every store, granted only where needed."""

from __future__ import annotations

import pytest

from infra.config import ConfigError, StackConfig


def _key_ref(synth) -> dict:
    (key_id,) = synth.resources("AWS::KMS::Key")
    return {"Fn::GetAtt": [key_id, "Arn"]}


def _kms_actions(synth, policy_prefix: str) -> set[str]:
    """The kms: actions the IAM policy whose logical id starts with ``policy_prefix`` allows."""
    actions: set[str] = set()
    for logical_id, policy in synth.resources("AWS::IAM::Policy").items():
        if logical_id.startswith(policy_prefix):
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
                listed = statement["Action"]
                listed = [listed] if isinstance(listed, str) else listed
                actions |= {a for a in listed if a.startswith("kms:")}
    return actions


def test_encryption_setting_is_validated():
    assert StackConfig.from_context({"encryption": "cmk"}.get).encryption == "cmk"
    assert StackConfig().encryption == "aws"
    with pytest.raises(ConfigError, match="encryption must be one of"):
        StackConfig.from_context({"encryption": "kms"}.get)


def test_default_has_only_the_alert_topic_key(synth):
    # encryption=aws: the one key is the alert topic's (CloudWatch alarms need a CMK to publish)
    (key,) = synth.resources("AWS::KMS::Key").values()
    assert key["Properties"]["Description"] == "jobsched alert topic"
    assert all("KmsMasterKeyId" not in q["Properties"] for q in synth.resources("AWS::SQS::Queue").values())


def test_cmk_creates_one_rotated_retained_key(cmk_synth):
    (key,) = cmk_synth.resources("AWS::KMS::Key").values()
    assert key["Properties"]["EnableKeyRotation"] is True
    assert key["DeletionPolicy"] == "Retain"


def test_every_store_uses_the_key(cmk_synth):
    arn = _key_ref(cmk_synth)
    for table in cmk_synth.resources("AWS::DynamoDB::Table").values():
        assert table["Properties"]["SSESpecification"]["KMSMasterKeyId"] == arn
    queues = cmk_synth.resources("AWS::SQS::Queue").values()
    assert (
        len(queues) == 11
    )  # five run queues (four for Lambda, the container pool's), DLQs, the scheduler's DLQ
    for queue in queues:
        assert queue["Properties"]["KmsMasterKeyId"] == arn
    for group in cmk_synth.resources("AWS::Logs::LogGroup").values():
        assert group["Properties"]["KmsKeyId"] == arn
    for function in cmk_synth.resources("AWS::Lambda::Function").values():
        assert function["Properties"]["KmsKeyArn"] == arn
    (bucket,) = cmk_synth.resources("AWS::S3::Bucket").values()
    (rule,) = bucket["Properties"]["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert rule["ServerSideEncryptionByDefault"] == {"SSEAlgorithm": "aws:kms", "KMSMasterKeyID": arn}
    assert rule["BucketKeyEnabled"] is True
    (topic,) = cmk_synth.resources("AWS::SNS::Topic").values()
    assert topic["Properties"]["KmsMasterKeyId"] == arn


def test_key_policy_lets_logs_and_alarms_use_the_key(cmk_synth):
    (key,) = cmk_synth.resources("AWS::KMS::Key").values()
    statements = key["Properties"]["KeyPolicy"]["Statement"]
    services = {str(s["Principal"].get("Service")): s for s in statements if "Service" in s["Principal"]}
    (logs,) = [s for name, s in services.items() if "logs." in name]
    assert "kms:EncryptionContext:aws:logs:arn" in logs["Condition"]["ArnLike"]
    assert set(services["cloudwatch.amazonaws.com"]["Action"]) == {"kms:Decrypt", "kms:GenerateDataKey*"}


def test_sqs_producers_get_exactly_generate_data_key_and_decrypt(cmk_synth):
    # The state machine (sendMessage.waitForTaskToken) and the scheduler (its DLQ) only send to queues
    for prefix in ("LongJobsChunkedJobRole", "DispatchSchedulerRole"):
        assert _kms_actions(cmk_synth, prefix) == {"kms:GenerateDataKey", "kms:Decrypt"}, prefix


def test_functions_get_the_key_through_their_grants(cmk_synth):
    # Every function role can decrypt (environment, consumed queues); CDK's table grants add the rest
    for prefix in ("ApiApiRole", "WorkersWorkerRole", "WorkersDlqConsumerRole", "DispatchDispatcherRole"):
        assert "kms:Decrypt" in _kms_actions(cmk_synth, prefix), prefix


def test_default_grants_no_key_to_functions(synth):
    for prefix in ("ApiApiRole", "WorkersWorkerRole", "LongJobsChunkedJobRole", "DispatchSchedulerRole"):
        assert _kms_actions(synth, prefix) == set(), prefix
