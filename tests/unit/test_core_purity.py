"""jobsched/core is pure (DESIGN §7, STYLE rule 2): time is a parameter; no clock reads, no environment,
no AWS SDK. This reads the sources, so a regression fails here rather than in a review."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parents[2] / "jobsched" / "core"
FORBIDDEN_IMPORTS = {"boto3", "botocore", "os", "time"}
FORBIDDEN_CALLS = {"now", "utcnow", "today"}


def _modules() -> list[Path]:
    return sorted(CORE.glob("*.py"))


@pytest.mark.parametrize("path", _modules(), ids=lambda p: p.name)
def test_core_module_imports_no_sdk_environment_or_clock(path):
    tree = ast.parse(path.read_text())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            imported.add(node.module.split(".")[0])
    assert not imported & FORBIDDEN_IMPORTS, f"{path.name} imports {sorted(imported & FORBIDDEN_IMPORTS)}"


@pytest.mark.parametrize("path", _modules(), ids=lambda p: p.name)
def test_core_module_never_reads_the_clock(path):
    calls = [
        node.func.attr
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
    ]
    assert not set(calls) & FORBIDDEN_CALLS, f"{path.name} calls {sorted(set(calls) & FORBIDDEN_CALLS)}"
