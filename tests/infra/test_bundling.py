"""The local bundler on a tiny project tree: what goes in, what stays out, how failure reads."""

from __future__ import annotations

import subprocess
import sys
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


# --- bytecode (docs/performance.md, "Lambda asset and cold start"; decision 0039) ------------------

HOST_VERSION = f"{sys.version_info.major}.{sys.version_info.minor}"


def _pyc_flags(pyc: Path) -> int:
    """The flags word of a .pyc header (PEP 552): 0b01 = hash-based, 0b10 = check the source."""
    return int.from_bytes(pyc.read_bytes()[4:8], "little")


def test_with_an_interpreter_every_module_ships_unchecked_hash_bytecode(project, tmp_path):
    # Given an interpreter of the target's version (here: this one, for a bundle of this version)
    # When the asset is bundled with it
    out = bundle_into(tmp_path / "out", project_root=project, python_version=HOST_VERSION,
                      bytecode=sys.executable)  # fmt: skip
    # Then every module has its bytecode for that version, hash-based and never checked against the
    # source (a zip need not keep timestamps), and the tree's stale .pyc was not copied
    tag = sys.implementation.cache_tag
    for source in out.rglob("*.py"):
        pyc = source.parent / "__pycache__" / f"{source.stem}.{tag}.pyc"
        assert pyc.is_file(), f"{source} has no bytecode"
        assert _pyc_flags(pyc) == 0b01
    assert not (out / "jobsched" / "__pycache__" / "stale.cpython-311.pyc").exists()


def test_the_shipped_bytecode_is_what_runs_even_if_the_source_beside_it_differs(project, tmp_path):
    # Given a bundle with bytecode, whose source is then edited (as if the sources' timestamps or
    # contents changed on the way to /var/task)
    out = bundle_into(tmp_path / "out", project_root=project, python_version=HOST_VERSION,
                      bytecode=sys.executable)  # fmt: skip
    (out / "jobsched" / "__init__.py").write_text("VERSION = 2\n")
    # When a fresh interpreter that writes no bytecode imports it from the bundle
    result = subprocess.run(
        [sys.executable, "-E", "-s", "-S", "-B", "-c", "import jobsched; print(jobsched.VERSION)"],
        cwd=out, capture_output=True, text=True, check=True,
    )  # fmt: skip
    # Then the bytecode ran, not a compile of the source
    assert result.stdout.strip() == "1"


def test_without_an_interpreter_the_bundle_ships_sources_only(project, tmp_path, _private_cache):
    # Given a dependency tree in the cache already compiled by an earlier bundle with bytecode
    bundle_into(tmp_path / "compiled", project_root=project, python_version=HOST_VERSION,
                bytecode=sys.executable)  # fmt: skip
    # When the same target is bundled without an interpreter
    out = bundle_into(tmp_path / "out", project_root=project, python_version=HOST_VERSION)
    # Then no bytecode and no cache marker reaches it
    assert list(out.rglob("__pycache__")) == []
    assert sorted(p.name for p in out.iterdir()) == ["functions", "jobsched"]


def test_the_cached_dependencies_are_compiled_once(project, tmp_path, _private_cache, monkeypatch):
    # Given a cached dependency tree holding a module (as an installed wheel leaves it)
    tree = bundling.cached_dependencies(
        project / "requirements.txt", HOST_VERSION, "manylinux2014_x86_64", _private_cache
    )
    (tree / "dep.py").write_text("D = 1\n")
    calls = _count_installs(monkeypatch)
    # When two bundles with bytecode are made from it
    one = bundle_into(tmp_path / "one", project_root=project, python_version=HOST_VERSION,
                      platform="manylinux2014_x86_64", bytecode=sys.executable)  # fmt: skip
    bundle_into(tmp_path / "two", project_root=project, python_version=HOST_VERSION,
                platform="manylinux2014_x86_64",
                bytecode=sys.executable)  # fmt: skip
    # Then the dependency's bytecode ships, compiled by the first only (our packages by each)
    assert (one / "__pycache__" / f"dep.{sys.implementation.cache_tag}.pyc").is_file()
    compiled_trees = [c[-1] for c in calls if "compileall" in c]
    assert compiled_trees.count(str(tree)) == 1
    assert not (one / ".compiled-unchecked-hash").exists()


def test_bytecode_changes_the_asset_hash(project):
    assert source_hash(project_root=project, bytecode=True) != source_hash(project_root=project)


def test_the_interpreter_is_the_env_variable_if_it_is_the_runtime_s_version():
    env = {bundling.ENV_BUNDLE_PYTHON: sys.executable, "PATH": ""}
    assert bundling.bytecode_interpreter(HOST_VERSION, env) == sys.executable
    with pytest.raises(
        BundlingError, match=rf"is Python {HOST_VERSION}, but the Lambda runtime is Python 3\.1"
    ):
        bundling.bytecode_interpreter("3.10" if HOST_VERSION != "3.10" else "3.12", env)


def test_the_interpreter_is_found_on_path_by_its_version_s_name(tmp_path):
    # Given a directory on PATH with python<this version> in it
    (tmp_path / f"python{HOST_VERSION}").symlink_to(sys.executable)
    # Then it is the one for this version, and none is found for a version nothing on PATH is
    assert bundling.bytecode_interpreter(HOST_VERSION, {"PATH": str(tmp_path)}) == str(
        tmp_path / f"python{HOST_VERSION}"
    )
    assert bundling.bytecode_interpreter("3.99", {"PATH": str(tmp_path)}) is None
    # And a python3.99 that is really another version is not taken for one
    (tmp_path / "python3.99").symlink_to(sys.executable)
    assert bundling.bytecode_interpreter("3.99", {"PATH": str(tmp_path)}) is None
