"""The fair share of a pool's invocations (decision 0057), on the in-memory fakes: a tenant holding its
slots is refused in the head-room while another tenant's batch is admitted there; a held batch takes
the slot its tenant frees; short invocations write nothing; a refusal never spends the redrive."""

from __future__ import annotations

from datetime import timedelta

import pytest

from jobsched.aws.limits_store import Semaphores, share_key
from jobsched.runtime import observability as obs
from jobsched.services.deliveries import Delivery
from jobsched.services.shares import SHARE_LEASE_SECONDS, ProcessHolds, ShareGate
from tests.aws.conftest_worker import Kit, sent_messages
from tests.aws.memory import memory_aws  # noqa: F401  (this file runs on the in-memory fakes)

SLOTS = 2


@pytest.fixture
def kit(aws, clock):
    return Kit(aws, clock)


def gate(
    kit: Kit, *, register_after: float = 0.0, hold: float = 0.5, on_sleep=None, slots: int = SLOTS
) -> ShareGate:
    """A gate over the fakes: ``default`` lets a tenant hold 2 invocations; the gate's sleep moves the
    fake clock (and calls ``on_sleep`` first), its monotonic clock is the fake clock."""

    def sleep(seconds: float) -> None:
        if on_sleep is not None:
            on_sleep()
        kit.clock.advance(timedelta(seconds=seconds))

    return ShareGate(
        slots=Semaphores(kit.dynamo, kit.aws.settings.leases_table),
        queues=kit.queues,
        tenant_slots={"default": slots},
        queue_kinds={url: kind for kind, url in kit.aws.settings.queue_urls.items()},
        clock=kit.clock,
        metrics=kit.metrics,
        sleep=sleep,
        monotonic=lambda: kit.clock.now().timestamp(),
        process=ProcessHolds(),
        register_after=register_after,
        hold_seconds=hold,
    )


def delivered(kit: Kit, tenant: str, receive_count: int = 1) -> Delivery:
    """A run of ``tenant`` sent to ``default`` and received, as the event source mapping hands it over."""
    _, msg = kit.new_run(job_id=f"job-{tenant}", tenant=tenant)
    url = kit.aws.settings.queue_url("default")
    kit.aws.clients.sqs.send_message(QueueUrl=url, MessageBody=msg.to_json())
    got = kit.aws.clients.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1, VisibilityTimeout=300)
    m = got["Messages"][0]
    return Delivery(m["MessageId"], m["Body"], m["ReceiptHandle"], url, receive_count)


def holders(kit: Kit, tenant: str) -> set[str]:
    return set(Semaphores(kit.dynamo, kit.aws.settings.leases_table).holders(share_key("default", tenant)))


def visible_ids(kit: Kit) -> set[str]:
    url = kit.aws.settings.queue_url("default")
    got = kit.aws.clients.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=0)
    return {m["MessageId"] for m in got.get("Messages", [])}


def test_a_tenant_under_its_slots_is_admitted_and_counted(kit):
    """Given no invocation of acme, when two batches of acme enter, then both are admitted and both
    invocations are registered holders of acme's share."""
    shares = gate(kit)
    first = shares.enter([delivered(kit, "acme")], "inv-1")
    second = shares.enter([delivered(kit, "acme")], "inv-2")
    assert len(first.admitted) == len(second.admitted) == 1
    assert (first.deferred, second.deferred) == ([], [])
    assert holders(kit, "acme") == {"inv-1", "inv-2"}


def test_the_head_room_refuses_the_tenant_holding_its_slots_and_admits_another(kit):
    """Given noisy holding its 2 invocations, when a batch with one noisy run and one quiet run enters
    a third invocation (the head-room), then the quiet run is admitted and the noisy one is refused:
    left in the queue (deferred) and visible again at once, with no write; noisy's holders unchanged."""
    shares = gate(kit)
    shares.enter([delivered(kit, "noisy")], "inv-1")
    shares.enter([delivered(kit, "noisy")], "inv-2")
    noisy, quiet = delivered(kit, "noisy"), delivered(kit, "quiet")
    mixed = shares.enter([noisy, quiet], "inv-3")
    assert [d.message_id for d in mixed.admitted] == [quiet.message_id]
    assert mixed.deferred == [noisy.message_id] and mixed.refused == [noisy.message_id]
    assert visible_ids(kit) == {noisy.message_id}
    assert holders(kit, "noisy") == {"inv-1", "inv-2"}
    assert kit.metrics.count(obs.SHARE_REFUSED) == 1


def test_a_held_batch_takes_the_slot_its_tenant_frees(kit):
    """Given noisy holding its 2 invocations, when a third noisy batch enters and one of the two ends
    while it is held, then the held batch is admitted (not refused) and registered in its place."""
    holds: dict[str, object] = {}

    def first_ends() -> None:
        if "inv-1" in holds:
            holds.pop("inv-1").exit(kit.clock.now())  # type: ignore[attr-defined]

    shares = gate(kit, on_sleep=first_ends)
    holds["inv-1"] = shares.enter([delivered(kit, "noisy")], "inv-1")
    shares.enter([delivered(kit, "noisy")], "inv-2")
    third = shares.enter([delivered(kit, "noisy")], "inv-3")
    assert len(third.admitted) == 1 and third.deferred == []
    assert holders(kit, "noisy") == {"inv-2", "inv-3"}
    assert kit.metrics.count(obs.SHARE_HELD) == 1


def test_a_crashed_invocation_stops_counting_when_its_lease_ends(kit):
    """Given noisy's 2 holders registered by another process that never exited (crashed), when a noisy
    batch enters after their lease ended, then it is admitted."""
    crashed = gate(kit, hold=0)
    crashed.enter([delivered(kit, "noisy")], "inv-1")
    crashed.enter([delivered(kit, "noisy")], "inv-2")
    shares = gate(kit, hold=0)
    assert shares.enter([delivered(kit, "noisy")], "inv-3").deferred != []
    kit.clock.advance(timedelta(seconds=SHARE_LEASE_SECONDS + 1))
    assert shares.enter([delivered(kit, "noisy")], "inv-4").deferred == []


@pytest.mark.parametrize(("receive_count", "resent"), [(3, False), (4, True)])
def test_a_refusal_near_the_redrive_re_sends_a_fresh_copy(kit, receive_count, resent):
    """Given noisy holding its slots, when a noisy delivery received for the receive_count-th time is
    refused, then before the 4th receive it is left in the queue (deferred); from the 4th on a fresh
    copy is sent and the delivery acknowledged, so refusals never redrive a run to the DLQ."""
    shares = gate(kit, hold=0)
    shares.enter([delivered(kit, "noisy")], "inv-1")
    shares.enter([delivered(kit, "noisy")], "inv-2")
    late = delivered(kit, "noisy", receive_count=receive_count)
    before = len(sent_messages(kit.aws))
    share = shares.enter([late], "inv-3")
    assert share.refused == [late.message_id]
    assert share.deferred == ([] if resent else [late.message_id])
    assert len(sent_messages(kit.aws)) - before == (1 if resent else 0)


def test_a_short_invocation_writes_nothing(kit):
    """Given the lazy registration (after 0.5 s), when a batch is admitted and its invocation ends at
    once, then nothing was written: the share item does not exist (one read was made)."""
    shares = gate(kit, register_after=0.5)
    share = shares.enter([delivered(kit, "acme")], "inv-1")
    share.exit(kit.clock.now())
    assert len(share.admitted) == 1
    assert kit.dynamo.get(kit.aws.settings.leases_table, {"lease_key": share_key("default", "acme")}) is None


def test_this_processs_invocations_count_before_they_register(kit):
    """Given a tenant allowed 1 invocation and one of this process admitted but not registered (lazy:
    its tenant held none), when a second batch of the tenant enters the same process, then it is
    refused: the process counts its own invocations exactly; once the first ends, one is admitted."""
    shares = gate(kit, register_after=3600, hold=0, slots=1)
    one = shares.enter([delivered(kit, "noisy")], "inv-1")
    assert holders(kit, "noisy") == set()
    second = delivered(kit, "noisy")
    assert shares.enter([second], "inv-2").deferred == [second.message_id]
    one.exit(kit.clock.now())
    assert shares.enter([delivered(kit, "noisy")], "inv-3").deferred == []


def test_an_invocation_that_ended_here_stops_counting_before_its_release_is_written():
    """Given a tenant's 2 registered invocations, both of this process, when one ends (its release not
    yet written), then this process admits another at once."""
    process = ProcessHolds()
    assert process.take_if_under("k", "a", set(), 2) and process.take_if_under("k", "b", {"a"}, 2)
    assert not process.take_if_under("k", "c", {"a", "b"}, 2)
    process.discard("k", "a", ended=True)
    assert process.take_if_under("k", "c", {"a", "b"}, 2)


def test_a_queue_without_a_share_and_a_body_without_a_tenant_are_admitted_without_a_read(kit):
    """Given a gate with a share on default only, when a batch on high and a record that is not a run
    enter, then both are admitted and no share item is read."""
    shares = gate(kit)
    high_url = kit.aws.settings.queue_url("high")
    records = [
        Delivery("m-1", '{"tenant": "acme", "run_id": "r"}', "rh", high_url),
        Delivery("m-2", "[]", "rh", kit.aws.settings.queue_url("default")),
    ]
    before = kit.meter.snapshot()
    share = shares.enter(records, "inv-1")
    assert [d.message_id for d in share.admitted] == ["m-1", "m-2"]
    assert kit.meter.snapshot() == before
