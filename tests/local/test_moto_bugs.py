"""The moto bugs our correctness patches work around are still in moto (decision 0042).

Each reproduction is read from docs/decisions/0042-emulator-boundary.md (the one copy, upstream-ready)
and run as it is in a fresh interpreter, where no patch is applied (this suite's conftest patches
moto in *this* process). A reproduction asserts what AWS documents, so with a moto that has the bug
it ends in ``AssertionError: BUG: ...``: the test passes. When a moto release fixes the bug, the
script exits 0 and the test fails, naming the patch that can go.
"""

from __future__ import annotations

import inspect
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from jobsched.local import moto_fixes

RECORD = Path(__file__).resolve().parents[2] / "docs" / "decisions" / "0042-emulator-boundary.md"
_BLOCK = re.compile(
    r"^```python\n(?P<code># moto-bug: (?P<bug>[\w-]+) \(patch: (?P<patch>[\w.]+)\)\n.*?)^```",
    re.MULTILINE | re.DOTALL,
)
#: bug -> (the patch that works around it, the script that reproduces it)
REPRODUCTIONS = {m["bug"]: (m["patch"], m["code"]) for m in _BLOCK.finditer(RECORD.read_text())}
#: Endpoint variables an embedded-mode test may leave set: a reproduction must reach ``mock_aws``.
_ENDPOINTS = ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_SQS", "AWS_ENDPOINT_URL_DYNAMODB")


def _patch(name: str):
    """The patch function ``name`` (``module.function``) of :mod:`jobsched.local.moto_fixes`."""
    module, function = name.split(".")
    return getattr(getattr(moto_fixes, module), function)


def test_the_record_reproduces_every_bug_a_correctness_patch_works_around():
    # Given the correctness patches (what correctness.apply() calls) and the record's reproductions
    apply_source = inspect.getsource(moto_fixes.correctness.apply)
    patches = {f"correctness.{name}" for name in re.findall(r"(_\w+)\(\)", apply_source)}
    # Then each correctness patch has at least one reproduction, and each reproduction names a patch
    # that exists
    assert patches == {patch for patch, _ in REPRODUCTIONS.values()}
    for patch, _ in REPRODUCTIONS.values():
        assert callable(_patch(patch))


@pytest.mark.slow
@pytest.mark.parametrize("bug", sorted(REPRODUCTIONS))
def test_the_bug_is_still_in_moto(bug: str, tmp_path: Path):
    # Given the record's reproduction of the bug, as a script of its own
    patch, code = REPRODUCTIONS[bug]
    script = tmp_path / f"{bug}.py"
    script.write_text(code)
    env = {k: v for k, v in os.environ.items() if k not in _ENDPOINTS}
    # When it runs against moto as installed, unpatched
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    # Then it shows the bug: the assertion of AWS's behaviour fails
    if done.returncode == 0:
        pytest.fail(
            f"moto {moto_fixes.installed_moto_version()} no longer shows {bug}: the reproduction passed "
            f"({done.stdout.strip()!r}). The patch {patch} may go (docs/decisions/0042-emulator-boundary.md)."
        )
    last = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else ""
    assert last.startswith("AssertionError: BUG:"), f"the reproduction broke:\n{done.stdout}\n{done.stderr}"
