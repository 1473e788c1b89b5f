"""The payload bucket: private, encrypted, TLS only, objects expire."""

from __future__ import annotations


def _bucket(synth) -> dict:
    return synth.template["Resources"][synth.logical_id(synth.stack.storage.bucket)]["Properties"]


def test_bucket_blocks_all_public_access(synth):
    assert _bucket(synth)["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True,
        "BlockPublicPolicy": True,
        "IgnorePublicAcls": True,
        "RestrictPublicBuckets": True,
    }


def test_bucket_is_encrypted(synth):
    rules = _bucket(synth)["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert rules[0]["ServerSideEncryptionByDefault"]["SSEAlgorithm"] == "AES256"


def test_objects_expire_after_the_retention(synth):
    (rule,) = _bucket(synth)["LifecycleConfiguration"]["Rules"]
    assert rule["ExpirationInDays"] == synth.stack.config.retention_days
    assert rule["AbortIncompleteMultipartUpload"] == {"DaysAfterInitiation": 1}
    assert rule["Status"] == "Enabled"


def test_bucket_refuses_requests_without_tls(synth):
    bucket = {"Ref": synth.logical_id(synth.stack.storage.bucket)}
    (policy,) = [
        p for p in synth.resources("AWS::S3::BucketPolicy").values() if p["Properties"]["Bucket"] == bucket
    ]
    denies = [
        s
        for s in policy["Properties"]["PolicyDocument"]["Statement"]
        if s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    ]
    assert len(denies) == 1
