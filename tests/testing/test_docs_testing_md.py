"""docs/testing.md's code blocks are real: each ```python block of the page is run as a module and
every ``test_*`` function it defines is called (the page promises this file does)."""

from __future__ import annotations

import re
import types
from pathlib import Path

import pytest

PAGE = Path(__file__).resolve().parents[2] / "docs" / "testing.md"
BLOCKS = re.findall(r"```python\n(.*?)```", PAGE.read_text(), flags=re.S)


def test_the_page_has_its_examples():
    assert len(BLOCKS) == 4


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_each_block_runs_and_its_tests_pass(index: int):
    """Given a code block of the page, When it is run as a module, Then each test it defines passes."""
    module = types.ModuleType(f"docs_testing_md_{index}")
    exec(compile(BLOCKS[index], f"{PAGE}:block{index}", "exec"), module.__dict__)
    tests = [value for name, value in vars(module).items() if name.startswith("test_") and callable(value)]
    assert tests, "a block of the page defines no test"
    for test in tests:
        test()
