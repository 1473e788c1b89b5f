"""Embedded modes one after another in one process each run the real functions on their own tables.

A real function builds its services once per container from the environment of its first event
(:mod:`jobsched.compose.seam`); the embedded mode sets that environment to its own tables and queues,
so it makes the loaded functions' seams forget their services when it starts and when it stops.
"""

from __future__ import annotations

import gc
import time

from functions import dispatcher
from jobsched.local import collector
from jobsched.local.embedded import EmbeddedMode
from tests.local.conftest import machinery_config

#: Every function but the dispatcher is left out: only its ticks run.
ONLY_THE_DISPATCHER = {"api": None, "worker": None, "dlq_consumer": None, "sweeper": None}


def _jobs_table_of_a_tick(mode: EmbeddedMode, timeout: float = 30.0) -> str:
    """The Jobs table the real dispatcher's built services use, once a tick has built them."""
    deadline = time.monotonic() + timeout
    while not dispatcher.seam.built:
        assert time.monotonic() < deadline, "the dispatcher did not tick"
        time.sleep(0.05)
    settings, _, _ = dispatcher.seam.services()
    return settings.jobs_table


def test_a_second_embedded_mode_builds_the_real_functions_afresh() -> None:
    first_config = machinery_config(tick_seconds=0.1)
    with EmbeddedMode(first_config, handlers=dict(ONLY_THE_DISPATCHER), out=lambda _line: None) as first:
        first_table = _jobs_table_of_a_tick(first)
        assert first_table.startswith(first_config.prefix)
    # Stopped: nothing built from its environment is kept for the next one.
    assert not dispatcher.seam.built

    second_config = machinery_config(tick_seconds=0.1)
    with EmbeddedMode(second_config, handlers=dict(ONLY_THE_DISPATCHER), out=lambda _line: None) as second:
        second_table = _jobs_table_of_a_tick(second)
    assert second_table.startswith(second_config.prefix)
    assert second_table != first_table


def test_a_running_embedded_mode_keeps_its_startup_objects_out_of_the_collectors_way() -> None:
    """Given an embedded mode started, then the objects alive at its start are frozen (a full garbage
    collection no longer walks them: 0.2-0.4 s pauses of the whole process during a burst before);
    once it stopped, they are the collector's again (a later mode in this process frees them). The
    collector's thresholds are the embedded mode's while it runs, and the process's own again after."""
    config = machinery_config(tick_seconds=0.1)
    gc.unfreeze()  # as in a process that has not settled its collector (the suite's conftest has)
    gc.set_threshold(700, 10, 10)
    try:
        with EmbeddedMode(config, handlers=dict(ONLY_THE_DISPATCHER), out=lambda _line: None):
            assert gc.get_freeze_count() > 10_000
            assert gc.get_threshold() == collector.THRESHOLDS
        assert gc.get_freeze_count() == 0
        assert gc.get_threshold() == (700, 10, 10)
    finally:
        collector.settle()  # the suite's own setting again (tests/conftest.py)
