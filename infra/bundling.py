"""One Lambda code asset for every function, bundled locally with pip/uv (no Docker).

The asset holds our runtime dependencies (``requirements.txt``, installed as manylinux wheels for the
Lambda platform) plus the ``jobsched`` and ``functions`` packages, without the parts of ``jobsched``
that only development uses (:data:`DEV_ONLY`: the benchmarks, the embedded mode with its emulator
patches, the CLI, the deploy rehearsal). No function imports them (import-linter's contract "The
Lambda code never imports development-only code", tests/infra/test_asset.py). Every function shares
the asset, so a synth bundles once. The asset hash is computed from the sources that go into it, the
requirements and the target platform, so an unchanged tree reuses a staged asset and a changed one
can never be deployed stale.

The installed dependencies are cached between runs (a synth in every ``make test`` would otherwise
download the Lambda platform's wheels each time): under ``$JOBSCHED_CACHE_DIR``, else
``$XDG_CACHE_HOME/jobsched``, else ``~/.cache/jobsched``, in ``bundle-deps/<key>``, where the key is a
digest of the requirements file's text, the Python version and the platform. A second bundle with the
same three copies the cached tree and needs no network; a changed requirements file installs afresh.
The requirements are lower bounds, so a cached tree keeps the versions it was installed with until the
file changes; delete the directory (``make clean-cache``) to pick up newer releases. The
:data:`KEEP_CACHED` most recently used trees are kept, older ones removed.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Mapping
from pathlib import Path

import aws_cdk as cdk
import jsii
from aws_cdk import aws_lambda as lambda_

PROJECT_ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("jobsched", "functions")
#: Subpackages of ``jobsched`` that only development uses, left out of the asset (and of its hash, so
#: editing a benchmark never redeploys the functions). Keep in step with the import-linter contract
#: "The Lambda code never imports development-only code" in pyproject.toml.
DEV_ONLY = ("jobsched.bench", "jobsched.local", "jobsched.cli", "jobsched.rehearsal")
#: Your own job handlers: a package at the project root, bundled when it exists (see docs/deploy.md).
OPTIONAL_PACKAGES = ("handlers",)
REQUIREMENTS = "requirements.txt"

# The Lambda runtime and the wheels bundled for it must agree; change them together.
LAMBDA_RUNTIME = lambda_.Runtime.PYTHON_3_14
LAMBDA_PYTHON_VERSION = "3.14"
LAMBDA_ARCHITECTURE = lambda_.Architecture.ARM_64
LAMBDA_PLATFORM = "manylinux2014_aarch64"

#: Never in the asset: bytecode (compiled for the build machine's Python, not Lambda's) and tool caches.
_SKIP_DIRS = frozenset({"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache"})
_SKIP_SUFFIXES = (".pyc", ".pyo")

ENV_CACHE_DIR = "JOBSCHED_CACHE_DIR"
CACHE_SUBDIR = "bundle-deps"
#: Cached dependency trees kept (the most recently used); the asset and the tests' host bundle use two.
KEEP_CACHED = 4
_COMPLETE = ".complete"  # written last into a cached tree: a tree without it is never used


class BundlingError(RuntimeError):
    """Raised when the dependencies cannot be installed into the asset (no wheel for the platform,
    no network to the package index, a bad requirements file). The message carries the tool's output."""


def _installer(python_version: str, platform: str, target: Path, requirements: Path) -> list[str]:
    """The install command: uv when it sits next to our interpreter (fast, cached), else pip."""
    uv = Path(sys.executable).with_name("uv")
    uv_path = str(uv) if uv.exists() else shutil.which("uv")
    if uv_path:
        machine, _, tag = platform.partition("_")  # manylinux2014_aarch64 -> aarch64-manylinux2014
        uv_platform = f"{tag}-{machine}" if tag else platform
        return [
            uv_path, "pip", "install", "--quiet", "--no-compile", "--target", str(target),
            "--python-platform", uv_platform, "--python-version", python_version,
            "--only-binary", ":all:", "-r", str(requirements),
        ]  # fmt: skip
    return [
        sys.executable, "-m", "pip", "install", "--quiet", "--no-compile", "--disable-pip-version-check",
        "--target", str(target), "--platform", platform, "--implementation", "cp",
        "--python-version", python_version, "--only-binary=:all:", "-r", str(requirements),
    ]  # fmt: skip


def cache_root(environ: Mapping[str, str] | None = None) -> Path:
    """``$JOBSCHED_CACHE_DIR`` > ``$XDG_CACHE_HOME/jobsched`` > ``~/.cache/jobsched``."""
    env = os.environ if environ is None else environ
    if env.get(ENV_CACHE_DIR):
        return Path(env[ENV_CACHE_DIR]).expanduser()
    return Path(env.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "jobsched"


def dependencies_key(requirements_text: str, python_version: str, platform: str) -> str:
    """What the installed dependencies depend on: the requirements, the Python version, the platform."""
    return hashlib.sha256(f"{python_version}|{platform}|{requirements_text}".encode()).hexdigest()[:32]


def cached_dependencies(requirements: Path, python_version: str, platform: str, cache_dir: Path) -> Path:
    """The dependency tree for these requirements and target, installed into the cache if not there.

    The install goes to a private staging directory renamed into place once complete, so an
    interrupted or failed install leaves nothing that a later run would take for a cached tree, and
    two concurrent runs cannot mix their files."""
    text = requirements.read_text()
    root = cache_dir / CACHE_SUBDIR
    final = root / dependencies_key(text, python_version, platform)
    if (final / _COMPLETE).is_file():
        os.utime(final)  # most recently used: kept by the pruning below
        return final
    root.mkdir(parents=True, exist_ok=True)
    staging = root / f".staging-{uuid.uuid4().hex}"
    try:
        command = _installer(python_version, platform, staging, requirements)
        staging.mkdir()
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise BundlingError(f"installing {requirements.name} failed ({command[0]}):\n{result.stderr}")
        shutil.rmtree(staging / "bin", ignore_errors=True)  # console scripts are useless in Lambda
        (staging / ".lock").unlink(missing_ok=True)  # uv's install lock, not part of the code
        (staging / _COMPLETE).write_text(f"{python_version} {platform}\n{text}")
        if final.exists() and not (final / _COMPLETE).is_file():
            shutil.rmtree(final, ignore_errors=True)  # an incomplete tree left by a crash
        try:
            staging.rename(final)
        except OSError:  # another run finished the same tree first: use theirs
            if not (final / _COMPLETE).is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    _prune(root, keep=KEEP_CACHED)
    return final


def _prune(root: Path, *, keep: int) -> None:
    trees = [p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")]
    trees.sort(key=lambda p: p.stat().st_mtime, reverse=True)
    for old in trees[keep:]:
        shutil.rmtree(old, ignore_errors=True)


def _dev_only_dirs(project_root: Path) -> set[Path]:
    return {project_root.joinpath(*name.split(".")) for name in DEV_ONLY}


def _asset_files(project_root: Path, package: str) -> list[Path]:
    """The files of ``package`` that go into the asset: no bytecode, no development-only subpackage."""
    excluded = _dev_only_dirs(project_root)
    return sorted(
        p
        for p in (project_root / package).rglob("*")
        if p.is_file()
        and _SKIP_DIRS.isdisjoint(p.relative_to(project_root).parts)
        and not p.name.endswith(_SKIP_SUFFIXES)
        and not any(p.is_relative_to(d) for d in excluded)
    )


def bundled_packages(project_root: Path = PROJECT_ROOT) -> tuple[str, ...]:
    """Our packages plus the optional ones (the user's ``handlers/``) that exist in ``project_root``."""
    extra = tuple(p for p in OPTIONAL_PACKAGES if (project_root / p / "__init__.py").is_file())
    return (*PACKAGES, *extra)


def bundle_into(
    output_dir: str | Path,
    *,
    python_version: str = LAMBDA_PYTHON_VERSION,
    platform: str = LAMBDA_PLATFORM,
    project_root: Path = PROJECT_ROOT,
    cache_dir: Path | None = None,
) -> Path:
    """Copy the runtime dependencies (from the cache, installed there first if needed) and our
    packages into ``output_dir``; return it.

    ``python_version``/``platform`` default to the Lambda target; tests pass the host's to import the
    handlers from a bundle built the same way. ``cache_dir`` defaults to :func:`cache_root`.
    """
    target = Path(output_dir)
    target.mkdir(parents=True, exist_ok=True)
    dependencies = cached_dependencies(
        project_root / REQUIREMENTS, python_version, platform, cache_dir or cache_root()
    )
    shutil.copytree(dependencies, target, ignore=shutil.ignore_patterns(_COMPLETE), dirs_exist_ok=True)
    for package in bundled_packages(project_root):
        for path in _asset_files(project_root, package):
            destination = target / path.relative_to(project_root)
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, destination)
    return target


def source_hash(
    python_version: str = LAMBDA_PYTHON_VERSION,
    platform: str = LAMBDA_PLATFORM,
    project_root: Path = PROJECT_ROOT,
) -> str:
    """A digest of everything that goes into the asset: our sources, the requirements, the target."""
    digest = hashlib.sha256(f"{python_version}|{platform}".encode())
    files = [project_root / REQUIREMENTS]
    for package in bundled_packages(project_root):
        files += _asset_files(project_root, package)
    for path in files:
        digest.update(str(path.relative_to(project_root)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


@jsii.implements(cdk.ILocalBundling)
class LocalPipBundling:
    """CDK local bundling: runs :func:`bundle_into` on this machine instead of in a Docker image."""

    def __init__(self, python_version: str, platform: str, project_root: Path) -> None:
        self._python_version = python_version
        self._platform = platform
        self._project_root = project_root

    def try_bundle(self, output_dir: str, *_options: object, **_kw_options: object) -> bool:
        """Bundle into ``output_dir``; jsii passes the bundling options, which we do not need."""
        bundle_into(
            output_dir,
            python_version=self._python_version,
            platform=self._platform,
            project_root=self._project_root,
        )
        return True


def code_asset(
    *,
    python_version: str = LAMBDA_PYTHON_VERSION,
    platform: str = LAMBDA_PLATFORM,
    project_root: Path = PROJECT_ROOT,
) -> lambda_.Code:
    """The shared code asset. Create it once per stack and pass it to every function."""
    return lambda_.Code.from_asset(
        str(project_root / "functions"),  # a small source dir: bundling reads from project_root itself
        asset_hash_type=cdk.AssetHashType.CUSTOM,
        asset_hash=source_hash(python_version, platform, project_root),
        bundling=cdk.BundlingOptions(
            image=cdk.DockerImage.from_registry("unused-local-bundling-only"),
            local=LocalPipBundling(python_version, platform, project_root),
        ),
    )
