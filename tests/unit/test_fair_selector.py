"""The embedded mode's fair-queue ordering (jobsched.local.fairness): fixed messages, fixed instants."""

from __future__ import annotations

from typing import Any

from jobsched.local.fairness import FairSelector, group_of

T0 = 1000.0  # monotonic seconds; the selector never reads a clock


def msgs(group: str | None, count: int, start: int = 0) -> list[dict[str, Any]]:
    attributes = {"MessageGroupId": group} if group else {}
    return [
        {"MessageId": f"{group or 'none'}-{i}", "Body": "{}", "Attributes": dict(attributes)}
        for i in range(start, start + count)
    ]


def hold(selector: FairSelector, messages: list[dict[str, Any]], now: float = T0) -> None:
    selector.add(messages, now, [None] * len(messages))


def ids(messages: list[dict[str, Any]]) -> list[str]:
    return [m["MessageId"] for m in messages]


def test_a_quiet_group_behind_a_noisy_backlog_goes_out_first() -> None:
    """Given tenant a with 40 runs in flight and 100 more held, and then one run of tenant b
    When the next batch of 10 is taken
    Then b's run is first and the rest of the batch is a's, oldest first."""
    selector = FairSelector()
    hold(selector, msgs("a", 140))
    selector.take(40, T0)  # 40 in flight: more than 10 % of in-flight and at least 30 -> noisy
    hold(selector, msgs("b", 1))
    assert selector.noisy(T0) == {"a"}
    batch = selector.take(10, T0)
    assert ids(batch) == ["b-0", *[f"a-{i}" for i in range(40, 49)]]


def test_below_the_detection_thresholds_messages_go_out_oldest_first() -> None:
    """Given a tenant with 20 messages in flight (under the 30 of the concurrency measure, even after
    this batch), no processing time recorded, and messages of a and b held, a's first
    When a batch is taken
    Then nothing is reordered: oldest first, as a standard queue without a noisy group."""
    selector = FairSelector()
    hold(selector, msgs("a", 20))
    selector.take(20, T0)
    hold(selector, msgs("a", 3, start=20))
    hold(selector, msgs("b", 2))
    assert selector.noisy(T0) == set()
    assert ids(selector.take(5, T0)) == ["a-20", "a-21", "a-22", "b-0", "b-1"]


def test_the_rule_is_evaluated_before_each_message_of_a_batch() -> None:
    """Given a with 29 in flight (one short of noisy) and a's then b's messages held
    When a batch is taken
    Then a's oldest goes first, which makes a noisy (30 in flight), so b's follow before a's rest."""
    selector = FairSelector()
    hold(selector, msgs("a", 29))
    selector.take(29, T0)
    hold(selector, msgs("a", 3, start=29))
    hold(selector, msgs("b", 2))
    assert ids(selector.take(5, T0)) == ["a-29", "b-0", "b-1", "a-30", "a-31"]


def test_a_group_with_most_of_the_recent_processing_time_is_noisy() -> None:
    """Given a's invocations took 9 s and b's 0.5 s in the last minute, nothing in flight
    When messages of a (held first) and b wait
    Then a is noisy by processing time share (> 10 %) and b goes first; b at 5 % is quiet."""
    selector = FairSelector()
    hold(selector, msgs("a", 1) + msgs("b", 1))
    a0, b0 = selector.take(2, T0)
    selector.finish([a0], T0 + 9.0)
    selector.finish([b0], T0 + 0.5)
    hold(selector, msgs("a", 2, start=1) + msgs("b", 1, start=1), now=T0 + 10)
    assert selector.noisy(T0 + 10) == {"a"}
    assert ids(selector.take(3, T0 + 10)) == ["b-1", "a-1", "a-2"]


def test_processing_time_older_than_the_window_no_longer_counts() -> None:
    """Given a's 9 s of processing ended 61 s ago (the window is 60 s)
    When a and b wait again
    Then neither is noisy and the oldest message goes first."""
    selector = FairSelector()
    hold(selector, msgs("a", 1))
    selector.finish(selector.take(1, T0), T0 + 9.0)
    hold(selector, msgs("a", 1, start=1) + msgs("b", 1), now=T0 + 70.0)
    assert selector.noisy(T0 + 70.0) == set()
    assert ids(selector.take(2, T0 + 70.0)) == ["a-1", "b-0"]


def test_among_noisy_groups_the_one_with_fewest_in_flight_goes_first() -> None:
    """Given a with 60 and b with 40 runs in flight (both noisy), and messages of both held, a's first
    When a batch of 25 is taken
    Then b's go out until b has as many in flight as a, then a's and b's alternate (ties: oldest)."""
    selector = FairSelector(time_share=1.0)  # concurrency share only, for exact counts
    hold(selector, msgs("a", 60) + msgs("b", 40))
    selector.take(100, T0)
    hold(selector, msgs("a", 20, start=60) + msgs("b", 30, start=40))
    assert selector.noisy(T0) == {"a", "b"}
    batch = ids(selector.take(25, T0))
    assert batch[:20] == [f"b-{i}" for i in range(40, 60)]
    assert batch[20:] == ["a-60", "b-60", "a-61", "b-61", "a-62"]
    assert selector.in_flight("a") == 63 and selector.in_flight("b") == 62


def test_finished_invocations_leave_flight_and_a_group_can_turn_quiet() -> None:
    """Given a noisy a (40 in flight) whose invocations all finish at once
    When its in-flight count is back to 0 and processing time is not considered
    Then a is quiet again and its held messages go out in plain order."""
    selector = FairSelector(time_share=1.0)
    hold(selector, msgs("a", 40))
    flying = selector.take(40, T0)
    assert selector.noisy(T0) == {"a"}
    selector.finish(flying, T0 + 1)
    assert selector.in_flight("a") == 0
    assert selector.noisy(T0 + 1) == set()


def test_a_message_without_a_group_is_a_group_of_its_own() -> None:
    """Given two messages without MessageGroupId
    Then each is its own group (SQS fair queues treat them so)."""
    first, second = msgs(None, 2)
    assert group_of(first) != group_of(second)
    assert group_of(msgs("acme", 1)[0]) == "acme"


def test_a_message_received_again_keeps_its_place_and_takes_the_new_receipt_handle() -> None:
    """Given a held message received a second time (its visibility ran out)
    Then it is held once, in its first place, with the newer receipt handle and refresh instant."""
    selector = FairSelector()
    first = msgs("a", 2)
    hold(selector, first)
    again = dict(first[0], ReceiptHandle="newer")
    selector.add([again], T0 + 5, [None])
    assert selector.held == 2
    assert [h.message["MessageId"] for h in selector.stale(T0 + 5, 5)] == ["a-1"]
    assert selector.take(1, T0 + 5)[0]["ReceiptHandle"] == "newer"


def test_stale_refreshed_and_dropped_messages() -> None:
    """Given messages held since T0
    When 30 s have passed, Then they are stale for a 30 s threshold; refreshed ones are not;
    dropped ones are gone (never handed out)."""
    selector = FairSelector()
    hold(selector, msgs("a", 3))
    assert len(selector.stale(T0 + 30, 30)) == 3
    selector.refreshed({"a-0"}, T0 + 30)
    selector.drop({"a-1"})
    assert [h.message["MessageId"] for h in selector.stale(T0 + 30, 30)] == ["a-2"]
    assert ids(selector.take(10, T0 + 30)) == ["a-0", "a-2"]


def test_a_partial_batch_of_runs_not_yet_due_waits_until_the_earliest_is_close() -> None:
    """Given two run messages due at epoch 100.0 and 100.5, held at epoch 99.0, batches of 10
    Then no batch is ready yet, the wait is until 0.1 s before the earliest; at 99.95 it is ready;
    a non-run message or a full batch is ready at once."""
    selector = FairSelector()
    selector.add(msgs("a", 2), T0, [100.0, 100.5])
    ready, wait = selector.ready(10, 99.0, 0.1)
    assert not ready and wait is not None and abs(wait - 0.9) < 1e-9
    assert selector.ready(10, 99.95, 0.1) == (True, None)
    assert selector.ready(2, 99.0, 0.1) == (True, None)
    selector.add(msgs("b", 1), T0, [None])
    assert selector.ready(10, 99.0, 0.1) == (True, None)
    assert FairSelector().ready(10, 99.0, 0.1) == (False, None)


def test_a_failed_refresh_lets_go_only_of_a_message_not_received_again() -> None:
    """Given two held messages whose refresh was refused, one of them received again meanwhile
    Then only the other is let go; the one received again stays held with its newer handle."""
    selector = FairSelector()
    first, second = [dict(m, ReceiptHandle="old") for m in msgs("a", 2)]
    hold(selector, [first, second])
    selector.add([dict(first, ReceiptHandle="new")], T0 + 1, [None])
    selector.drop_unless_received_again({"a-0": "old", "a-1": "old"})
    assert [(m["MessageId"], m["ReceiptHandle"]) for m in selector.take(10, T0 + 1)] == [("a-0", "new")]
