"""Dead-letter notifications on the in-memory fakes: one per dead letter, to the job's notify or the
tenant's default, over SNS (captured by an SQS subscription) and a loopback webhook; deduplicated per
run; owed notifications the sender did not deliver are delivered by the sweeper."""

from __future__ import annotations

import json
import threading
from dataclasses import replace
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from jobsched.aws.attempts import NOTIFY_PENDING, AttemptStore
from jobsched.aws.jobs_store import JobsStore
from jobsched.aws.notify_store import TenantSettingsStore
from jobsched.compose.pipeline import notifier_from_settings
from jobsched.runtime import observability as obs
from jobsched.services.dead_letters import DeadLetterService
from jobsched.services.deliveries import Delivery
from jobsched.services.dlq_consumer import DlqConsumer
from tests.aws.conftest_worker import Kit, run_service, sent_messages, sweeper_for
from tests.aws.memory import memory_aws  # noqa: F401  (on the in-memory fakes)

TOPIC_NAME = "team-payments"


class _Hook(BaseHTTPRequestHandler):
    answers: list[int] = []
    seen: list[tuple[dict, dict]] = []

    def log_message(self, *args):
        pass

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        self.seen.append((dict(self.headers), json.loads(self.rfile.read(length) or b"null")))
        status = self.answers.pop(0) if self.answers else 200
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()


@pytest.fixture
def hook():
    _Hook.answers, _Hook.seen = [], []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hook)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/dead-letters", _Hook
    server.shutdown()
    server.server_close()


@pytest.fixture
def topic(aws):
    """An SNS topic with an SQS queue subscribed (raw delivery): what is published lands there."""
    sns, sqs = aws.clients.sns, aws.clients.sqs
    arn = sns.create_topic(Name=TOPIC_NAME)["TopicArn"]
    url = sqs.create_queue(QueueName="notes")["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    sns.subscribe(TopicArn=arn, Protocol="sqs", Endpoint=queue_arn, Attributes={"RawMessageDelivery": "true"})

    def published() -> list[dict]:
        out = []
        while got := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", []):
            for m in got:
                out.append(json.loads(m["Body"]))
                sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
        return out

    return arn, published


@pytest.fixture
def kit(aws, clock):
    kit = Kit(aws, clock)
    settings = replace(
        aws.settings,
        notify_topic_arns=("arn:aws:sns:us-east-1:123456789012:team-*",),
        allowed_http_hosts=("127.0.0.1",),
    )
    kit.notifier = notifier_from_settings(settings, aws.clients, kit.dynamo, metrics=kit.metrics)
    kit.attempts.on_dead_letter = kit.notifier.on_dead_letter  # as the wiring builds the worker's store
    return kit


def _fail(kit, notify=None, **kw):
    """A run that fails permanently on its first attempt; returns (run, message)."""
    run, msg = kit.new_run({"handler": "demo.fail"}, {"kind": "permanent"}, **kw)
    msg = replace(msg, notify=notify or {})
    out = kit.worker().handle(Delivery.of(msg.to_json()), kit.clock.now())
    assert out.status == "dead_lettered"
    return run, msg


def _dead_letter(kit, run_id):
    return DeadLetterService(run_service(kit)).get("acme", run_id)


def test_a_permanent_failure_posts_one_notification_to_the_jobs_webhook(kit, hook):
    # Given a job whose notify names a webhook on an allowed loopback host
    url, server = hook
    # When its run fails permanently
    run, _ = _fail(kit, {"webhook": url})
    # Then the webhook got exactly one POST saying which run failed, why, and how to replay it
    [(headers, body)] = server.seen
    assert body["type"] == "dead_letter" and body["run_id"] == run.id and body["job_id"] == "job1"
    assert body["reason"] == "permanent" and "PermanentError" in body["error"] and body["attempts"] == 1
    assert body["replay"] == {"method": "POST", "path": f"/dead-letters/{run.id}/replay"}
    assert body["run"] == f"/runs/{run.id}"
    assert headers["Idempotency-Key"] == body["id"] == f"{run.id}@{body['failed_at']}"
    assert headers["X-Jobsched-Event"] == "dead_letter"
    # And the dead letter says it was sent, with no mark left to deliver
    assert _dead_letter(kit, run.id)["notification"]["state"] == "sent"
    assert NOTIFY_PENDING not in kit.attempts.get_item(run.id)
    assert kit.metrics.count(obs.NOTIFICATIONS_SENT) == 1


def test_an_sns_topic_receives_one_message_per_dead_letter(kit, topic):
    # Given a job whose notify names an allowed SNS topic (an SQS queue subscribed to it)
    arn, published = topic
    # When its run exhausts its attempts
    run, msg = kit.new_run({"handler": "demo.fail"}, {"kind": "retryable"}, max_attempts=1)
    kit.worker().handle(Delivery.of(replace(msg, notify={"sns_topic_arn": arn}).to_json()), kit.clock.now())
    # Then one message was published with the run, the error and the replay path
    [body] = published()
    assert body["run_id"] == run.id and body["reason"] == "exhausted" and body["attempts"] == 1
    assert body["replay"]["path"] == f"/dead-letters/{run.id}/replay"
    assert _dead_letter(kit, run.id)["notification"] == {
        "state": "sent",
        "to": ["sns_topic_arn"],
        "sent": ["sns_topic_arn"],
        "tries": 1,
        "at": body["failed_at"],
    }


def test_the_tenant_default_is_told_when_the_job_names_nobody(kit, hook):
    # Given a tenant default webhook and a job without notify
    url, server = hook
    TenantSettingsStore(kit.dynamo, kit.aws.settings.leases_table).put_notify(
        "acme", {"webhook": url}, kit.clock.now()
    )
    # When a run fails for good / Then the tenant's webhook is told once
    run, _ = _fail(kit)
    assert [body["run_id"] for _, body in server.seen] == [run.id]


def test_with_nobody_to_tell_nothing_is_sent_and_the_mark_is_settled(kit, hook):
    run, _ = _fail(kit)
    assert hook[1].seen == []
    assert _dead_letter(kit, run.id)["notification"]["state"] == "none"
    assert NOTIFY_PENDING not in kit.attempts.get_item(run.id)


def test_a_redelivered_failure_and_a_second_path_notify_once(kit, hook, clock):
    # Given a run dead-lettered (and notified) by the worker
    url, server = hook
    _, msg = _fail(kit, {"webhook": url})
    # When the same delivery comes again, the DLQ consumer sees the message, and the sweeper runs later
    assert kit.worker().handle(Delivery.of(msg.to_json()), clock.now()).status == "finished"
    assert DlqConsumer(kit.attempts).process(msg.to_json(), clock.now()).status == "finished"
    clock.advance(timedelta(minutes=10))
    sweeper_for(kit, JobsStore(kit.dynamo, kit.aws.settings.jobs_table)).sweep(clock.now())
    # Then the webhook was told exactly once
    assert len(server.seen) == 1


def test_two_senders_of_the_same_owed_notification_send_it_once(kit, hook, clock):
    # Given a dead letter whose writer died before delivering (no listener), its item read twice
    url, server = hook
    kit.attempts.on_dead_letter = None
    run, _ = _fail(kit, {"webhook": url})
    item = kit.attempts.get_item(run.id)
    # When two senders deliver from the same read
    outcomes = [kit.notifier.deliver(item, clock.now()), kit.notifier.deliver(item, clock.now())]
    # Then one sent, the other found the notification claimed or settled
    assert sorted(outcomes) == ["sent", "skipped"] and len(server.seen) == 1


def test_a_writer_that_dies_after_the_dead_letter_leaves_it_for_the_sweeper(kit, hook, clock):
    # Given a worker whose process dies right after the dead-letter write (no immediate delivery)
    url, server = hook
    kit.attempts.on_dead_letter = None
    run, _ = _fail(kit, {"webhook": url})
    assert server.seen == [] and _dead_letter(kit, run.id)["notification"] == {"state": "pending"}
    sweeper = sweeper_for(kit, JobsStore(kit.dynamo, kit.aws.settings.jobs_table))
    sweeper.notifier = kit.notifier
    # When a sweep runs within the grace, then after it, then again
    assert sweeper.sweep(clock.now()).notifications == 0
    clock.advance(timedelta(minutes=3))
    assert sweeper.sweep(clock.now()).notifications == 1
    assert sweeper.sweep(clock.now()).notifications == 0
    # Then the notification was delivered once, by the sweep past the grace
    assert len(server.seen) == 1 and server.seen[0][1]["run_id"] == run.id


def test_a_poison_dead_letter_is_notified_by_the_sweeper(kit, hook, clock):
    # Given the DLQ consumer (no notifier: it only marks) dead-letters a poison message
    url, server = hook
    _, msg = kit.new_run({"handler": "demo.echo"}, {})
    msg = replace(msg, notify={"webhook": url})
    consumer = DlqConsumer(AttemptStore(kit.dynamo, kit.aws.settings.runs_table))
    assert consumer.process(msg.to_json(), clock.now(), receive_count=5).status == "dead_lettered"
    assert server.seen == []
    # When the sweeper runs past its grace
    clock.advance(timedelta(minutes=3))
    sweeper = sweeper_for(kit, JobsStore(kit.dynamo, kit.aws.settings.jobs_table))
    sweeper.notifier = kit.notifier
    sweeper.sweep(clock.now())
    # Then the job's webhook is told, with reason poison
    assert [body["reason"] for _, body in server.seen] == ["poison"]


def test_a_replayed_run_that_fails_again_is_a_new_dead_letter_and_notifies_again(kit, hook, clock):
    # Given a dead-lettered, notified run
    url, server = hook
    run, _ = _fail(kit, {"webhook": url})
    # When it is replayed and fails again
    clock.advance(timedelta(minutes=1))
    run_service(kit).replay("acme", run.id, clock.now())
    [(body, _)] = [m for m in sent_messages(kit.aws) if m[0]["attempt"] == 2]
    assert kit.worker().handle(Delivery.of(json.dumps(body)), clock.now()).status == "dead_lettered"
    # Then a second notification went out, with a new id
    first, second = (b for _, b in server.seen)
    assert first["run_id"] == second["run_id"] == run.id and first["id"] != second["id"]
    assert second["attempts"] == 2


def test_a_failed_try_is_retried_without_resending_what_was_reached(kit, hook, topic, clock):
    # Given a job naming a topic and a webhook that answers 503 once
    url, server = hook
    arn, published = topic
    server.answers = [503]
    run, _ = _fail(kit, {"webhook": url, "sns_topic_arn": arn})
    # Then the topic got it, the webhook try failed and the notification waits for a retry
    view = _dead_letter(kit, run.id)["notification"]
    assert view["state"] == "retrying" and view["sent"] == ["sns_topic_arn"] and "503" in view["error"]
    # When the sweeper retries past its grace
    clock.advance(timedelta(minutes=3))
    sweeper = sweeper_for(kit, JobsStore(kit.dynamo, kit.aws.settings.jobs_table))
    sweeper.notifier = kit.notifier
    sweeper.sweep(clock.now())
    # Then the webhook got it on the second try and the topic was not published to again
    assert len(server.seen) == 2 and len(published()) == 1
    assert server.seen[1][0]["X-Jobsched-Attempt"] == "2"
    assert _dead_letter(kit, run.id)["notification"]["state"] == "sent"


def test_a_notification_that_keeps_failing_is_given_up_after_max_tries(kit, hook, clock):
    url, server = hook
    server.answers = [503] * 10
    kit.notifier.max_tries = 2
    run, _ = _fail(kit, {"webhook": url})
    clock.advance(timedelta(minutes=3))
    item = kit.attempts.get_item(run.id)
    assert kit.notifier.deliver(item, clock.now()) == "failed"
    assert _dead_letter(kit, run.id)["notification"]["state"] == "failed"
    assert NOTIFY_PENDING not in kit.attempts.get_item(run.id)
    assert kit.metrics.count(obs.NOTIFICATIONS_FAILED) == 1


def test_a_webhook_the_ssrf_guard_refuses_is_given_up_at_once(kit, clock):
    # Given a webhook on a loopback host the deployment does not allow (a name, so only a send catches it)
    kit.notifier.policy.allowed_hosts = frozenset()
    run, _ = _fail(kit, {"webhook": "http://127.0.0.1:9/hook"})
    view = _dead_letter(kit, run.id)["notification"]
    assert view["state"] == "failed" and "loopback" in view["error"]


def test_a_topic_outside_the_allow_list_is_never_published_to(kit, aws):
    # Given a snapshot naming a topic the deployment no longer allows
    other = aws.clients.sns.create_topic(Name="elsewhere")["TopicArn"]
    run, _ = _fail(kit, {"sns_topic_arn": other})
    view = _dead_letter(kit, run.id)["notification"]
    assert view["state"] == "failed" and "notify_topic_arns" in view["error"]


def test_replaying_or_discarding_a_dead_letter_cancels_its_owed_notification(kit, hook, clock):
    # Given two dead letters whose notification is still owed (their writer died before sending)
    url, server = hook
    kit.attempts.on_dead_letter = None
    replayed, _ = _fail(kit, {"webhook": url}, job_id="job1")
    discarded, _ = _fail(kit, {"webhook": url}, job_id="job2")
    # When one is replayed and the other discarded before the sweeper came
    run_service(kit).replay("acme", replayed.id, clock.now())
    DeadLetterService(run_service(kit)).discard("acme", discarded.id, clock.now())
    # Then neither owes a notification any more, and a sender finds nothing to send
    clock.advance(timedelta(minutes=3))
    for run in (replayed, discarded):
        item = kit.attempts.get_item(run.id)
        assert NOTIFY_PENDING not in item
        assert kit.notifier.deliver(item, clock.now()) == "skipped"
    assert server.seen == []
