"""tests/last_user.py: a session-wide process is stopped once, after the last test that uses it."""

from __future__ import annotations

from tests.last_user import LastUser


def test_the_process_stops_when_its_last_user_is_torn_down_and_only_then():
    """Given two users, When other tests and then the users are torn down, Then stop is called once,
    after the second user, and never again."""
    calls: list[str] = []
    tracker = LastUser(["a::one", "a::two"], lambda: calls.append("stop"))
    tracker.done("b::other")
    tracker.done("a::one")
    assert calls == [] and not tracker.stopped
    tracker.done("a::two")
    assert calls == ["stop"] and tracker.stopped
    tracker.done("a::two")
    tracker.done("c::later")
    assert calls == ["stop"]


def test_with_no_user_named_it_never_stops_early():
    """Given no users (a fixture set up for a test not among the session's items), Then no teardown
    stops it: the fixture's own finalizer does at the session's end."""
    calls: list[str] = []
    tracker = LastUser([], lambda: calls.append("stop"))
    tracker.done("a::one")
    assert calls == [] and not tracker.stopped
