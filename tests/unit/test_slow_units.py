"""tests/conftest.py: the order ``--dist loadgroup`` hands the work units out in."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from _pytest.config.argparsing import Parser
from xdist import plugin as xdist_plugin
from xdist.scheduler import LoadGroupScheduling

from tests.conftest import slow_units_first


class Item:
    """What the ordering reads of a collected test: its path, its marks, its node id."""

    def __init__(self, nodeid: str, group: str | None = None, **slow: Any) -> None:
        self.nodeid = nodeid
        self.path = Path(nodeid.split("::")[0])
        self.marks = {}
        if group is not None:
            self.marks["xdist_group"] = pytest.mark.xdist_group(group).mark
        if slow:
            self.marks["slow"] = pytest.mark.slow(**slow.get("kwargs", {})).mark

    def get_closest_marker(self, name: str) -> Any:
        return self.marks.get(name)


def order(items: list[Item]) -> list[str]:
    return [item.nodeid for item in slow_units_first(items)]  # type: ignore[arg-type]


def test_the_longest_slow_units_go_first_then_the_rest_in_collection_order() -> None:
    # Given short tests, a bare slow test, a slow(seconds=60) module in a group and a slow(seconds=35) one
    items = [
        Item("tests/a.py::t1"),
        Item("tests/b.py::t1", slow=True),
        Item("tests/c.py::t1", group="c", slow=True, kwargs={"seconds": 35}),
        Item("tests/a.py::t2"),
        Item("tests/d.py::t1", group="d", slow=True, kwargs={"seconds": 60}),
        Item("tests/d.py::t2", group="d"),
    ]
    # Then the 60 s unit comes first (both its tests), then 35 s, then the bare slow, then the others
    assert order(items) == [
        "tests/d.py::t1",
        "tests/d.py::t2",
        "tests/c.py::t1",
        "tests/b.py::t1",
        "tests/a.py::t1",
        "tests/a.py::t2",
    ]


def test_a_units_length_is_the_sum_of_its_files() -> None:
    # Given one group of three files marked slow (bare, bare, 25 s) and a single 40 s file
    items = [
        Item("tests/x.py::t", slow=True, kwargs={"seconds": 40}),
        Item("tests/g1.py::t", group="g", slow=True),
        Item("tests/g2.py::t", group="g", slow=True),
        Item("tests/g2.py::u", group="g", slow=True),  # the same file counts once
        Item("tests/g3.py::t", group="g", slow=True, kwargs={"seconds": 25}),
    ]
    # Then the group (two bare files and 25 s: 2 * SLOW_SECONDS + 25 = 45 s) goes before the 40 s file
    assert order(items) == [
        "tests/g1.py::t",
        "tests/g2.py::t",
        "tests/g2.py::u",
        "tests/g3.py::t",
        "tests/x.py::t",
    ]


def test_a_unit_that_waits_never_follows_another_while_a_busy_one_is_left() -> None:
    # Given four units that wait (95, 90, 60 and 50 s) and two that do not (40 and 35 s), and a short test
    items = [
        Item("tests/short.py::t"),
        Item("tests/busy40.py::t", slow=True, kwargs={"seconds": 40}),
        Item("tests/wait95.py::t", slow=True, kwargs={"seconds": 95, "waits": True}),
        Item("tests/wait90.py::t", slow=True, kwargs={"seconds": 90, "waits": True}),
        Item("tests/wait60.py::t", group="w60", slow=True, kwargs={"seconds": 60, "waits": True}),
        Item("tests/wait60.py::u", group="w60"),
        Item("tests/busy35.py::t", slow=True, kwargs={"seconds": 35}),
        Item("tests/wait50.py::t", slow=True, kwargs={"seconds": 50, "waits": True}),
    ]
    # Then the longest first, but a busy unit goes between two that wait while one is left; the waiting
    # ones left after the busy ones keep their order, and the short test comes last
    assert order(items) == [
        "tests/wait95.py::t",
        "tests/busy40.py::t",
        "tests/wait90.py::t",
        "tests/busy35.py::t",
        "tests/wait60.py::t",
        "tests/wait60.py::u",
        "tests/wait50.py::t",
        "tests/short.py::t",
    ]


def test_a_waiting_unit_after_a_busy_one_keeps_its_place() -> None:
    # Given a unit that waits after a longer busy one, and nothing else that waits
    items = [
        Item("tests/busy.py::t", slow=True, kwargs={"seconds": 60}),
        Item("tests/wait.py::t", slow=True, kwargs={"seconds": 50, "waits": True}),
        Item("tests/busy2.py::t", slow=True, kwargs={"seconds": 40}),
    ]
    # Then nothing moves: no unit that waits follows another
    assert order(items) == ["tests/busy.py::t", "tests/wait.py::t", "tests/busy2.py::t"]


# --- the scheduler make test runs the parallel part with ----------------------------------------------

ROOT = Path(__file__).resolve().parents[2]


def _parallel_options() -> list[str]:
    """``PYTEST_PARALLEL`` as the Makefile gives it to pytest, ``$(TEST_WORKERS)`` filled in."""
    text = (ROOT / "Makefile").read_text()
    workers = re.search(r"^TEST_WORKERS \?= (\d+)$", text, re.MULTILINE)
    options = re.search(r"^PYTEST_PARALLEL := (.*)$", text, re.MULTILINE)
    assert workers and options, "the Makefile defines TEST_WORKERS and PYTEST_PARALLEL"
    return options[1].replace("$(TEST_WORKERS)", workers[1]).split()


class Worker:
    """What pytest-xdist's scheduler sends work to: the indexes of the tests to run."""

    def __init__(self, number: int) -> None:
        self.gateway = SimpleNamespace(id=f"gw{number}")
        self.sent: list[list[int]] = []  # one list per unit sent
        self.shutting_down = False

    def send_runtest_some(self, indexes: list[int]) -> None:
        self.sent.append(indexes)

    def shutdown(self) -> None:
        self.shutting_down = True


def first_unit_sent(options: list[str], collection: list[str]) -> list[str]:
    """The tests pytest-xdist's own scheduler, configured by ``options``, sends the first worker."""
    parser = Parser()
    xdist_plugin.pytest_addoption(parser)
    option = parser.parse(options)
    option.tx = [f"{option.numprocesses}*popen"]  # what xdist derives from -n
    config = SimpleNamespace(option=option, getvalue=lambda name: getattr(option, name))
    scheduler = LoadGroupScheduling(config)
    workers = [Worker(number) for number in range(option.numprocesses)]
    for worker in workers:
        scheduler.add_node(worker)
        scheduler.add_node_collection(worker, collection)
    scheduler.schedule()
    return [collection[index] for index in workers[0].sent[0]]


def test_the_parallel_run_hands_the_units_out_in_the_order_the_workers_collected() -> None:
    # Given a collection in slow_units_first's order: one long test alone, then groups of short tests
    # with more tests each (pytest-xdist's default, --loadscope-reorder, sends the units with the most
    # tests first whatever the order collected)
    collection = [
        "tests/long.py::t",
        *(f"tests/g{g}.py::t{t}@g{g}" for g in range(1, 6) for t in range(3)),
    ]
    # When make test's parallel run schedules it, Then the first worker gets the long test first
    assert first_unit_sent(_parallel_options(), collection) == ["tests/long.py::t"]
    # (which the default would not do: it starts with a group)
    assert first_unit_sent(["-n", "4", "--dist", "loadgroup"], collection) == [
        "tests/g1.py::t0@g1",
        "tests/g1.py::t1@g1",
        "tests/g1.py::t2@g1",
    ]
