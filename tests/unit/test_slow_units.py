"""tests/conftest.py: the order ``--dist loadgroup`` hands the work units out in."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

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
