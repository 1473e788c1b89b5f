"""The local bundler on a tiny project tree: what goes in, what stays out, how failure reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from infra.bundling import BundlingError, bundle_into, source_hash


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "jobsched" / "__pycache__").mkdir(parents=True)
    (root / "jobsched" / "__init__.py").write_text("VERSION = 1\n")
    (root / "jobsched" / "__pycache__" / "stale.cpython-311.pyc").write_bytes(b"\0")
    (root / "functions").mkdir()
    (root / "functions" / "api.py").write_text("def handler(event, context):\n    return 1\n")
    (root / "requirements.txt").write_text("# nothing to install\n")
    return root


def test_bundle_holds_our_packages_without_bytecode_or_tool_files(project, tmp_path):
    out = bundle_into(tmp_path / "out", project_root=project)
    assert (out / "jobsched" / "__init__.py").read_text() == "VERSION = 1\n"
    assert (out / "functions" / "api.py").is_file()
    assert not (out / "jobsched" / "__pycache__").exists()
    assert sorted(p.name for p in out.iterdir()) == ["functions", "jobsched"]


def test_an_uninstallable_requirement_fails_with_the_tools_message(project, tmp_path):
    (project / "requirements.txt").write_text("not a valid requirement !!!\n")
    with pytest.raises(BundlingError, match=r"requirements\.txt failed") as raised:
        bundle_into(tmp_path / "out", project_root=project)
    assert "not a valid requirement" in str(raised.value)  # the installer's own explanation


def test_source_hash_changes_with_the_code_and_the_target(project):
    before = source_hash(project_root=project)
    assert source_hash(project_root=project) == before  # deterministic
    assert source_hash("3.13", project_root=project) != before  # another Python version
    (project / "functions" / "api.py").write_text("def handler(event, context):\n    return 2\n")
    assert source_hash(project_root=project) != before


def test_source_hash_ignores_bytecode(project):
    before = source_hash(project_root=project)
    (project / "jobsched" / "__pycache__" / "other.cpython-311.pyc").write_bytes(b"\1")
    assert source_hash(project_root=project) == before


def test_a_handlers_package_at_the_project_root_is_bundled(project, tmp_path):
    # Given the deployment's own job handlers in handlers/ (a package)
    (project / "handlers").mkdir()
    (project / "handlers" / "__init__.py").write_text("")
    (project / "handlers" / "billing.py").write_text("X = 1\n")
    # When the asset is bundled / Then the package is in it, next to ours
    out = bundle_into(tmp_path / "out", project_root=project)
    assert (out / "handlers" / "billing.py").read_text() == "X = 1\n"
    assert sorted(p.name for p in out.iterdir()) == ["functions", "handlers", "jobsched"]


def test_editing_a_handler_changes_the_asset_hash(project):
    (project / "handlers").mkdir()
    (project / "handlers" / "__init__.py").write_text("")
    before = source_hash(project_root=project)
    (project / "handlers" / "__init__.py").write_text("# changed\n")
    assert source_hash(project_root=project) != before
