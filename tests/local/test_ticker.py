"""The tick loop: the dispatcher is invoked for every shard, the sweeper on its own schedule."""

from __future__ import annotations

import threading
from typing import Any

from jobsched.local.ticker import Periodic
from tests.local.conftest import Machinery, wait_for


def test_the_dispatcher_is_invoked_for_every_shard(machinery: Machinery) -> None:
    # Given the embedded mode with 3 shards ticking every 0.2 s
    dispatcher = machinery.handlers["dispatcher"]

    # When a few ticks pass, Then each shard was invoked with {"shard": k} more than once
    def shards_seen_twice() -> bool:
        shards = [e.get("shard") for e in list(dispatcher.events)]
        return all(shards.count(k) >= 2 for k in range(3))

    wait_for(shards_seen_twice, timeout=5)
    assert {e["shard"] for e in list(dispatcher.events)} == {0, 1, 2}
    assert dispatcher.contexts[-1].function_name == "dispatcher"


def test_a_schedule_fires_on_its_interval_boundaries() -> None:
    # Given a schedule every 10 s and a clock at 12.5 s
    stop = threading.Event()
    periodic = Periodic(name="x", interval=10, event={}, invoke=lambda e: None, stop=stop, clock=lambda: 12.5)
    # Then the next tick is at 20 s, 7.5 s away
    assert periodic._next_delay() == 7.5


def test_a_handler_that_raises_does_not_stop_its_schedule() -> None:
    # Given a schedule whose handler always raises
    stop = threading.Event()
    calls: list[dict[str, Any]] = []

    def failing(event: dict[str, Any]) -> None:
        calls.append(event)
        raise RuntimeError("tick failed")

    periodic = Periodic(name="f", interval=0.02, event={"k": 1}, invoke=failing, stop=stop)
    periodic.start()
    try:
        # Then it keeps firing
        wait_for(lambda: len(calls) >= 3, timeout=3)
    finally:
        stop.set()
        periodic.join(2)
    assert calls[0] == {"k": 1}


def test_the_sweeper_runs_on_its_own_schedule(machinery: Machinery) -> None:
    # Given the sweeper scheduled every 0.5 s (a setting; 60 s by default)
    sweeper = machinery.handlers["sweeper"]
    # When a few intervals pass, Then it was invoked repeatedly with a scheduled event
    wait_for(lambda: len(sweeper.events) >= 2, timeout=5)
    assert sweeper.events[0] == {}
    assert sweeper.contexts[0].function_name == "sweeper"
    assert [s.name for s in machinery.mode.schedules].count("sweeper") == 1
