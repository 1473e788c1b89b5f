"""Usage that counts the rest (decision 0059 amended), on moto: the SNS publishes made for a tenant,
the DLQ consumer's requests and duration, and the deployment row the sweeper adds the event source
mappings' empty polls to."""

from __future__ import annotations

from datetime import date, timedelta

import pytest

import functions.dlq_consumer as dlq_function
import functions.sweeper as sweeper_function
from jobsched.aws.metering import dynamo_for
from jobsched.aws.notify_store import Publisher
from jobsched.aws.usage_store import UsageStore
from jobsched.core.usage import DEPLOYMENT, MAPPING_POLL_SECONDS, MAPPING_POLLERS
from jobsched.local.invoke import LambdaContext
from jobsched.runtime.resources import LAMBDA_QUEUE_KINDS
from jobsched.services.usage import TenantMeter
from tests.aws.conftest_worker import Kit
from tests.services.test_dlq import redrive_to_dlq


def usage_of(aws, tenant: str, day: date):
    store = UsageStore(dynamo_for(aws.settings, aws.clients.dynamodb), aws.settings.leases_table)
    return store.tenant_days(tenant, day, day)


def test_an_sns_publish_is_counted_for_the_notifications_tenant_per_started_64_kb(aws):
    # Given a topic and a publisher on a per-tenant meter, outside any tenant's lane (as the sweeper
    # delivers an owed notification)
    arn = aws.clients.sns.create_topic(Name="team-payments")["TopicArn"]
    meter = TenantMeter()
    publisher = Publisher(aws.clients.sns, meter)
    # When it publishes a small notification of acme and a 100 KB one of globex
    publisher.publish(arn, {"id": "n1", "type": "dead_letter", "tenant": "acme"}, "a dead letter")
    publisher.publish(arn, {"id": "n2", "tenant": "globex", "error": "x" * 100_000}, "a dead letter")
    # Then acme is counted one publish, globex two (100 KB is two started 64 KB chunks)
    settled = meter.settle()
    assert settled["acme"]["sns_publishes"] == 1
    assert settled["globex"]["sns_publishes"] == 2
    assert meter.requests["sns.Publish"] == 2


@pytest.fixture
def dlq_kit(aws_environ, clock):
    with dlq_function.seam.installed(clock=clock):
        yield Kit(aws_environ, clock)


def test_the_dlq_consumers_invocation_is_counted_for_the_tenant_of_the_poison_message(
    dlq_kit, clock, aws_environ
):
    # Given a poison message of an acme run in the default queue's DLQ
    _run, msg = dlq_kit.new_run(tenant="acme")
    message = redrive_to_dlq(aws_environ, msg.to_json())
    record = {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message["Body"],
        "attributes": message["Attributes"],
        "messageAttributes": {},
        "md5OfBody": message["MD5OfBody"],
        "eventSource": "aws:sqs",
        "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:dlq",
        "awsRegion": "us-east-1",
    }
    # When the DLQ consumer function handles it
    dlq_function.handler({"Records": [record]}, LambdaContext("dlq_consumer", 60))
    # Then acme's day carries the consumer's requests (its run's writes) and its one invocation
    [day] = usage_of(aws_environ, "acme", clock.now().date())
    assert day.wru > 1 and day.lambda_requests == pytest.approx(1.0) and day.lambda_gb_seconds > 0


@pytest.fixture
def sweeper_kit(aws_environ, clock):
    with sweeper_function.seam.installed(clock=clock):
        yield Kit(aws_environ, clock)


def test_each_sweep_adds_the_mappings_empty_polls_since_the_last_to_the_deployment_row(sweeper_kit, clock):
    settings = sweeper_kit.aws.settings
    mappings = sum(1 for k in settings.queue_urls if k in LAMBDA_QUEUE_KINDS) + len(settings.dlq_urls)
    per_second = mappings * MAPPING_POLLERS / MAPPING_POLL_SECONDS
    # When the sweeper runs on its schedule, then 7 minutes later
    sweeper_function.handler({}, LambdaContext("sweeper", 300))
    clock.advance(timedelta(minutes=7))
    sweeper_function.handler({}, LambdaContext("sweeper", 300))
    # Then the deployment row holds the empty polls of one sweep period (the first sweep) and of the
    # 7 minutes since: every mapping's pollers, one long poll each per 20 s
    [day] = usage_of(sweeper_kit.aws, DEPLOYMENT, clock.now().date())
    assert mappings == 9
    assert day.sqs_requests == pytest.approx(per_second * (sweeper_function.SWEEP_PERIOD_SECONDS + 420))
    assert day.tenant == DEPLOYMENT and day.estimated_usd(256) > 0
