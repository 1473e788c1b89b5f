"""The cancel board (decision 0013): one batched read of the cancellation flags of every run a worker
executes, each run read once per period while its target runs. Driven by hand (``threaded=False``)
on a fake monotonic clock, so which runs share a read is exact."""

from __future__ import annotations

import threading

from jobsched.targets.executor import CancelBoard


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def board_with(flagged: set[str], clock: Clock, interval: float = 1.0):
    calls: list[list[str]] = []
    metered: list[bool] = []

    def read(run_ids: list[str]) -> set[str]:
        calls.append(sorted(run_ids))
        return flagged & set(run_ids)

    board = CancelBoard(read, interval, on_read=metered.append, clock=clock, threaded=False)
    return board, calls, metered


def test_runs_started_within_a_tick_share_each_read_and_keep_one_read_per_period() -> None:
    """Given three runs whose targets started 0, 10 and 40 ms apart, and one that started 0.5 s later
    When the board runs for ten periods, reading at each quarter-period tick
    Then each read serves every run due before the next tick (the first three always together), each
    run is read once per period, and each read meters one unit per run and the request once."""
    clock = Clock()
    board, calls, metered = board_with(set(), clock)
    events = [threading.Event() for _ in range(4)]
    watches = []
    for i, started in enumerate((0.0, 0.01, 0.04, 0.5)):
        clock.now = started
        watches.append(board.watch(f"run{i}", events[i], lambda: None).__enter__())

    for step in range(1, 41):
        clock.now = 0.5 + step * board.tick
        due = board.take_due()
        if due:
            board.read_once(due)

    assert all(c == ["run0", "run1", "run2"] for c in calls if "run0" in c)
    assert [w.reads for w in watches] == [10, 10, 10, 10]  # 10.5 s of running: one read a period
    assert len(calls) == 20  # the first three's reads and the fourth's, each period
    assert metered.count(True) == len(calls) and len(metered) == 40


def test_a_flagged_run_is_cancelled_once_and_no_longer_read() -> None:
    clock = Clock()
    board, calls, _ = board_with({"b"}, clock)
    cancelled: list[str] = []
    a = board.watch("a", threading.Event(), lambda: cancelled.append("a")).__enter__()
    b = board.watch("b", threading.Event(), lambda: cancelled.append("b")).__enter__()

    for step in range(1, 13):
        clock.now = step * board.tick
        due = board.take_due()
        if due:
            board.read_once(due)

    assert cancelled == ["b"] and b.seen and not a.seen
    assert calls == [["a", "b"], ["a"], ["a"]]


def test_nothing_is_read_before_a_period_or_after_the_target_ends() -> None:
    """A target shorter than a period pays for no read; one that ended, or whose cancel event was set
    for another reason (a timeout), is read no more; with no run left the board says so (None)."""
    clock = Clock()
    board, calls, _ = board_with(set(), clock)
    short = board.watch("short", threading.Event(), lambda: None)
    with short:
        clock.now = 0.7
        assert board.take_due() == []
    timed_out = threading.Event()
    board.watch("slow", timed_out, lambda: None).__enter__()
    timed_out.set()
    clock.now = 5.0
    assert board.take_due() is None
    assert calls == []


def test_a_disabled_board_watches_nothing() -> None:
    clock = Clock()
    board, calls, _ = board_with({"a"}, clock, interval=0)
    with board.watch("a", threading.Event(), lambda: None):
        clock.now = 10.0
        assert board.take_due() is None
    assert calls == []
