"""Overlap policy: the full decision table, then the buffer_one protocol played over a sequence."""

from __future__ import annotations

import pytest

from jobsched.core.errors import ValidationError
from jobsched.core.overlap import OVERLAP_POLICIES, OverlapDecision, decide_overlap

ENQUEUE = OverlapDecision("enqueue")


@pytest.mark.parametrize("policy", OVERLAP_POLICIES)
def test_no_active_run_means_enqueue_for_every_policy(policy):
    # Given no run of the job is active and nothing is buffered
    # When a new occurrence is decided, Then it is enqueued
    assert decide_overlap(policy, previous_active=False, buffered_waiting=False) == ENQUEUE


@pytest.mark.parametrize(
    ("policy", "buffered_waiting", "expected"),
    [
        ("allow", False, OverlapDecision("enqueue")),
        ("skip", False, OverlapDecision("skip", reason="overlap")),
        ("buffer_one", False, OverlapDecision("buffer")),
        ("buffer_one", True, OverlapDecision("skip", reason="overlap")),
        ("replace", False, OverlapDecision("enqueue_and_cancel_previous", reason="replaced")),
    ],
)
def test_decision_while_previous_run_is_active(policy, buffered_waiting, expected):
    # Given the previous run is still queued or running
    # When a new occurrence is decided under the policy
    # Then the table's action (and reason) applies
    assert decide_overlap(policy, previous_active=True, buffered_waiting=buffered_waiting) == expected


@pytest.mark.parametrize("policy", ["allow", "skip", "replace"])
def test_policies_other_than_buffer_one_ignore_a_buffer_flag(policy):
    active = decide_overlap(policy, previous_active=True, buffered_waiting=True)
    assert active == decide_overlap(policy, previous_active=True, buffered_waiting=False)
    assert active.release_buffered is False


def test_buffer_one_with_stale_buffer_releases_it_and_buffers_the_new_one():
    # Given buffer_one, no active run, but a buffered occurrence left behind (its finish hook was lost)
    # When a new occurrence arrives
    decision = decide_overlap("buffer_one", previous_active=False, buffered_waiting=True)
    # Then the buffered one is released (enqueued) first and the new one takes the buffer slot
    assert decision == OverlapDecision("buffer", release_buffered=True)


def test_buffer_one_keeps_at_most_one_waiting_over_a_burst():
    # Given a long-running run and five occurrences arriving while it runs
    buffered, skipped = None, []
    for occurrence in range(5):
        # When each is decided, the caller storing the buffered instant on the job
        decision = decide_overlap("buffer_one", previous_active=True, buffered_waiting=buffered is not None)
        if decision.action == "buffer":
            buffered = occurrence
        elif decision.action == "skip":
            skipped.append(occurrence)
    # Then the first waits in the buffer and the four others are skipped for overlap
    assert buffered == 0
    assert skipped == [1, 2, 3, 4]


def test_unknown_policy_is_a_validation_error_listing_allowed_ones():
    with pytest.raises(ValidationError, match="'queue'; allowed: allow, skip, buffer_one, replace") as error:
        decide_overlap("queue", previous_active=True)
    assert error.value.field == "overlap_policy"
