"""The emulator boundary's version check (decision 0042): ``moto_fixes.apply()`` patches only the moto
it was written for, and refuses any other before it patches anything. The installed version is
replaced through ``moto_fixes.installed_moto_version`` (the lookup), never moto itself."""

from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path

import pytest

from jobsched.local import moto_fixes

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def patches_applied(monkeypatch) -> list[str]:
    """The patch groups :func:`moto_fixes.apply` applied during the test (recorded, not applied)."""
    applied: list[str] = []
    for group in ("correctness", "speed", "lanes"):
        monkeypatch.setattr(getattr(moto_fixes, group), "apply", lambda group=group: applied.append(group))
    return applied


def installed(monkeypatch, version: str) -> None:
    monkeypatch.setattr(moto_fixes, "installed_moto_version", lambda: version)


def test_the_installed_moto_is_the_supported_one():
    # Given this environment's moto, When it is checked, Then it is in the supported range
    moto_fixes.check_moto_version()


@pytest.mark.parametrize("version", ["5.2.6", "5.2.7", "5.2.40"])
def test_a_supported_moto_is_patched(monkeypatch, patches_applied, version):
    # Given a moto of the supported minor version, from the pinned patch release on
    installed(monkeypatch, version)
    # When the fixes are applied, Then every group of patches is
    moto_fixes.apply()
    assert patches_applied == ["correctness", "speed", "lanes"]


@pytest.mark.parametrize("version", ["5.3.0", "5.3.0rc1", "6.0.0", "5.2.5", "5.1.9", "4.2.14", "5.2", "dev"])
def test_another_moto_is_refused_before_anything_is_patched(monkeypatch, patches_applied, version):
    # Given a moto outside the supported range (a newer or older minor, an older patch release, a
    # version that cannot be read)
    installed(monkeypatch, version)
    # When the fixes are applied
    with pytest.raises(moto_fixes.UnsupportedMotoVersion) as refused:
        moto_fixes.apply()
    # Then nothing is patched, and the error names the installed version, the supported range, and
    # what to do
    assert patches_applied == []
    message = str(refused.value)
    assert f"moto {version} is installed" in message
    assert moto_fixes.SUPPORTED_MOTO in message
    assert "make install" in message
    assert "requirements-dev.txt" in message
    assert "0042-emulator-boundary.md" in message


def test_no_moto_at_all_is_refused(monkeypatch, patches_applied):
    # Given an environment where the moto distribution is not installed
    def missing() -> str:
        raise metadata.PackageNotFoundError("moto")

    monkeypatch.setattr(moto_fixes, "installed_moto_version", missing)
    # When the fixes are applied, Then they are refused, naming that no moto is installed
    with pytest.raises(moto_fixes.UnsupportedMotoVersion, match="moto none is installed"):
        moto_fixes.apply()
    assert patches_applied == []


def test_the_refusal_is_an_error_not_a_warning(monkeypatch):
    # Given an unsupported moto, Then the refusal stops the process's start as an error would
    installed(monkeypatch, "5.3.0")
    assert issubclass(moto_fixes.UnsupportedMotoVersion, RuntimeError)
    with pytest.raises(RuntimeError):
        moto_fixes.check_moto_version()


def test_requirements_pin_moto_to_the_supported_range():
    # Given requirements-dev.txt's moto line, Then it requires exactly the range the check accepts
    (line,) = [
        line for line in (ROOT / "requirements-dev.txt").read_text().splitlines() if line.startswith("moto")
    ]
    spec = re.match(r"moto\[[^\]]*\](\S+)", line)
    assert spec is not None
    assert spec.group(1) == moto_fixes.SUPPORTED_MOTO == ">=5.2.6,<5.3"
