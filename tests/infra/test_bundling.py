"""The local bundler on a tiny project tree: what goes in, what stays out, how failure reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from infra import bundling
from infra.bundling import BundlingError, bundle_into, cache_root, source_hash


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test bundles with a cache of its own (never the user's ~/.cache/jobsched)."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("JOBSCHED_CACHE_DIR", str(cache))
    return cache


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


def _add_dev_only_packages(root: Path) -> None:
    for name in bundling.DEV_ONLY:
        package = root.joinpath(*name.split("."))
        package.mkdir(parents=True)
        (package / "__init__.py").write_text("DEV = True\n")
        (package / "tool.py").write_text("X = 1\n")
    (root / "jobsched" / "locally.py").write_text("Y = 1\n")  # a module whose name merely starts alike


def test_development_only_packages_stay_out_of_the_bundle(project, tmp_path):
    # Given the project's jobsched package with every development-only subpackage in it
    _add_dev_only_packages(project)
    # When the asset is bundled
    out = bundle_into(tmp_path / "out", project_root=project)
    # Then none of them is in it, and the rest of jobsched is
    assert sorted(p.name for p in (out / "jobsched").iterdir()) == ["__init__.py", "locally.py"]


def test_editing_development_only_code_keeps_the_asset_hash(project):
    _add_dev_only_packages(project)
    before = source_hash(project_root=project)
    for name in bundling.DEV_ONLY:
        project.joinpath(*name.split("."), "tool.py").write_text("X = 2\n")
    assert source_hash(project_root=project) == before  # no redeploy for a benchmark's edit
    (project / "jobsched" / "locally.py").write_text("Y = 2\n")
    assert source_hash(project_root=project) != before


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


def _count_installs(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    calls: list[list[str]] = []
    real_run = bundling.subprocess.run

    def run(command, *args, **kwargs):
        calls.append(command)
        return real_run(command, *args, **kwargs)

    monkeypatch.setattr(bundling.subprocess, "run", run)
    return calls


def test_a_second_bundle_with_the_same_requirements_installs_nothing(project, tmp_path, monkeypatch):
    """Given a bundle built once (its dependencies installed into the cache)
    When the same requirements are bundled again, into another directory
    Then the installer does not run (no network), and the bundle holds the same files"""
    (project / "requirements.txt").write_text("# nothing to install\n")
    calls = _count_installs(monkeypatch)
    first = bundle_into(tmp_path / "one", project_root=project)
    second = bundle_into(tmp_path / "two", project_root=project)
    assert len(calls) == 1
    assert sorted(p.name for p in second.iterdir()) == sorted(p.name for p in first.iterdir())


def test_changed_requirements_install_afresh(project, tmp_path, monkeypatch):
    calls = _count_installs(monkeypatch)
    bundle_into(tmp_path / "one", project_root=project)
    (project / "requirements.txt").write_text("# nothing to install, but another file\n")
    bundle_into(tmp_path / "two", project_root=project)
    bundle_into(tmp_path / "three", project_root=project, python_version="3.12")
    assert len(calls) == 3


def test_a_failed_install_leaves_no_cached_tree(project, tmp_path, _private_cache):
    (project / "requirements.txt").write_text("not a valid requirement !!!\n")
    with pytest.raises(BundlingError):
        bundle_into(tmp_path / "out", project_root=project)
    assert list((_private_cache / "bundle-deps").iterdir()) == []


def test_only_the_most_recently_used_trees_are_kept(project, tmp_path, _private_cache):
    for n in range(bundling.KEEP_CACHED + 2):
        (project / "requirements.txt").write_text(f"# variant {n}\n")
        bundle_into(tmp_path / f"out{n}", project_root=project)
    assert len(list((_private_cache / "bundle-deps").iterdir())) == bundling.KEEP_CACHED


def test_the_cache_is_the_env_variable_then_the_user_cache():
    assert cache_root({"JOBSCHED_CACHE_DIR": "/c", "XDG_CACHE_HOME": "/x"}) == Path("/c")
    assert cache_root({"XDG_CACHE_HOME": "/x"}) == Path("/x/jobsched")
    assert cache_root({}) == Path.home() / ".cache" / "jobsched"
