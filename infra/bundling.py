"""One Lambda code asset for every function, bundled locally with pip/uv (no Docker).

The asset holds our runtime dependencies (``requirements.txt``, installed as manylinux wheels for the
Lambda platform) plus the ``jobsched`` and ``functions`` packages, without the parts of ``jobsched``
that only development uses (:data:`DEV_ONLY`: the benchmarks, the embedded mode with its emulator
patches, the CLI and its API client, the deploy rehearsal, the in-memory fakes for tests). No function
imports them (import-linter's contract "The Lambda code never imports development-only code",
tests/infra/test_asset.py). Every function shares the asset, so a synth bundles once. The asset hash
is computed from the sources that go into it, the requirements and the target platform, so an
unchanged tree reuses a staged asset and a changed one can never be deployed stale.

**Bytecode.** Lambda's code directory is read-only, so a module without its ``.pyc`` in the asset is
compiled from source at every cold start (three times the worker's import CPU, docs/performance.md).
Bytecode is specific to a Python minor version, so it can only be compiled by an interpreter of the
Lambda runtime's version: ``$JOBSCHED_BUNDLE_PYTHON`` when set (refused if it is another version), else
``python3.14`` (:data:`LAMBDA_PYTHON_VERSION`) on ``PATH``. With one, every module of the asset gets a
``__pycache__/*.cpython-314.pyc`` compiled with ``--invalidation-mode unchecked-hash`` (used without
comparing timestamps, which a zip need not keep, and the code cannot change under it); the
dependencies are compiled once in their cached tree. Without one the asset ships sources only, as
before, and the stack warns at synth (:func:`bytecode_warning`). Whether bytecode is in goes into the
asset hash.

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

import functools
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
from constructs import Construct

PROJECT_ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("jobsched", "functions")
#: Subpackages of ``jobsched`` that only development uses, left out of the asset (and of its hash, so
#: editing a benchmark never redeploys the functions). Keep in step with the import-linter contract
#: "The Lambda code never imports development-only code" in pyproject.toml.
DEV_ONLY = (
    "jobsched.bench",
    "jobsched.local",
    "jobsched.cli",
    "jobsched.client",
    "jobsched.rehearsal",
    "jobsched.testing",
)
#: Your own job handlers: a package at the project root, bundled when it exists (see docs/deploy.md).
OPTIONAL_PACKAGES = ("handlers",)
REQUIREMENTS = "requirements.txt"

# The Lambda runtime and the wheels bundled for it must agree; change them together.
LAMBDA_RUNTIME = lambda_.Runtime.PYTHON_3_14
LAMBDA_PYTHON_VERSION = "3.14"
LAMBDA_ARCHITECTURE = lambda_.Architecture.ARM_64
LAMBDA_PLATFORM = "manylinux2014_aarch64"

#: Never copied from the tree: bytecode (compiled for the developer's Python; the asset's own, when it
#: has any, is compiled by an interpreter of Lambda's version) and tool caches.
_SKIP_DIRS = frozenset({"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache"})
_SKIP_SUFFIXES = (".pyc", ".pyo")

ENV_CACHE_DIR = "JOBSCHED_CACHE_DIR"
#: The interpreter that compiles the asset's bytecode; it must be of the Lambda runtime's version.
ENV_BUNDLE_PYTHON = "JOBSCHED_BUNDLE_PYTHON"
_COMPILED = ".compiled-unchecked-hash"  # written into a cached tree once its bytecode is compiled
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


@functools.lru_cache(maxsize=16)
def _version_of(python: str) -> str | None:
    """``"3.14"`` for an interpreter of Python 3.14; None if it cannot be run."""
    try:
        result = subprocess.run(
            [python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True, text=True, check=False, timeout=30,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return None
    return result.stdout.strip() if result.returncode == 0 else None


def bytecode_interpreter(python_version: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The interpreter that compiles the asset's bytecode for ``python_version``, or None (sources only).

    ``$JOBSCHED_BUNDLE_PYTHON`` when set — a :class:`BundlingError` if it is not that version, since
    bytecode of another version would be ignored by Lambda and silently cost every cold start — else
    ``python<version>`` on ``PATH`` when it is that version."""
    env = os.environ if environ is None else environ
    chosen = env.get(ENV_BUNDLE_PYTHON)
    if chosen:
        found = _version_of(chosen)
        if found != python_version:
            raise BundlingError(
                f"{ENV_BUNDLE_PYTHON}={chosen} is Python {found or '(not runnable)'}, but the Lambda "
                f"runtime is Python {python_version}: point it at a python{python_version}, or unset it"
            )
        return chosen
    candidate = shutil.which(f"python{python_version}", path=env.get("PATH"))
    return candidate if candidate and _version_of(candidate) == python_version else None


def bytecode_warning(python_version: str = LAMBDA_PYTHON_VERSION) -> str:
    """What the stack says at synth when no interpreter can compile the asset's bytecode."""
    return (
        f"No Python {python_version} found to compile the Lambda asset's bytecode (python{python_version} "
        f"on PATH, or {ENV_BUNDLE_PYTHON}): the functions ship sources only, and every cold start "
        "compiles what it imports (about 3x the worker's import CPU; docs/performance.md, "
        "'Lambda asset and cold start'). Install it and synthesize again to ship bytecode."
    )


def compile_bytecode(python: str, tree: Path) -> None:
    """Compile every module under ``tree`` in place with ``python`` (hash-based, unchecked).

    A module that does not compile (some wheels carry files for other Python versions, such as
    templates or test data named ``.py``) keeps its source only, as without bytecode."""
    command = [
        python, "-m", "compileall", "-q", "-q", "-j", "0",
        "--invalidation-mode", "unchecked-hash", str(tree),
    ]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode not in (0, 1):  # 1: some file did not compile (kept as source)
        raise BundlingError(f"compiling the asset's bytecode failed ({python}):\n{result.stderr}")


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


def compiled_dependencies(tree: Path, python: str) -> Path:
    """``tree`` (a cached dependency tree) with its bytecode compiled, once."""
    marker = tree / _COMPILED
    if not marker.is_file():
        compile_bytecode(python, tree)  # each .pyc is written atomically: concurrent runs are safe
        marker.write_text(f"{python}\n")
    return tree


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
    bytecode: str | None = None,
) -> Path:
    """Copy the runtime dependencies (from the cache, installed there first if needed) and our
    packages into ``output_dir``; return it.

    ``python_version``/``platform`` default to the Lambda target; tests pass the host's to import the
    handlers from a bundle built the same way. ``cache_dir`` defaults to :func:`cache_root`.
    ``bytecode``: the interpreter (of ``python_version``) that compiles every module, or None for
    sources only (:func:`bytecode_interpreter` finds one).
    """
    target = Path(output_dir)
    target.mkdir(parents=True, exist_ok=True)
    dependencies = cached_dependencies(
        project_root / REQUIREMENTS, python_version, platform, cache_dir or cache_root()
    )
    skipped = [_COMPLETE, _COMPILED]
    if bytecode:
        compiled_dependencies(dependencies, bytecode)
    else:
        skipped += ["__pycache__"]
    shutil.copytree(dependencies, target, ignore=shutil.ignore_patterns(*skipped), dirs_exist_ok=True)
    for package in bundled_packages(project_root):
        for path in _asset_files(project_root, package):
            destination = target / path.relative_to(project_root)
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, destination)
        if bytecode:
            compile_bytecode(bytecode, target / package)
    return target


def source_hash(
    python_version: str = LAMBDA_PYTHON_VERSION,
    platform: str = LAMBDA_PLATFORM,
    project_root: Path = PROJECT_ROOT,
    bytecode: bool = False,
) -> str:
    """A digest of everything that goes into the asset: our sources, the requirements, the target,
    and whether it carries bytecode."""
    compiled = "|bytecode" if bytecode else ""
    digest = hashlib.sha256(f"{python_version}|{platform}{compiled}".encode())
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

    def __init__(
        self, python_version: str, platform: str, project_root: Path, bytecode: str | None = None
    ) -> None:
        self._python_version = python_version
        self._platform = platform
        self._project_root = project_root
        self._bytecode = bytecode

    def try_bundle(self, output_dir: str, *_options: object, **_kw_options: object) -> bool:
        """Bundle into ``output_dir``; jsii passes the bundling options, which we do not need."""
        bundle_into(
            output_dir,
            python_version=self._python_version,
            platform=self._platform,
            project_root=self._project_root,
            bytecode=self._bytecode,
        )
        return True


def code_asset(
    *,
    python_version: str = LAMBDA_PYTHON_VERSION,
    platform: str = LAMBDA_PLATFORM,
    project_root: Path = PROJECT_ROOT,
    bytecode: str | bool = True,
) -> lambda_.Code:
    """The shared code asset. Create it once per stack and pass it to every function. ``bytecode``:
    True (default) compiles it with :func:`bytecode_interpreter`'s interpreter when there is one, a
    path compiles it with that interpreter, False ships sources only."""
    compiler = bytecode_interpreter(python_version) if bytecode is True else (bytecode or None)
    return lambda_.Code.from_asset(
        str(project_root / "functions"),  # a small source dir: bundling reads from project_root itself
        asset_hash_type=cdk.AssetHashType.CUSTOM,
        asset_hash=source_hash(python_version, platform, project_root, bytecode=compiler is not None),
        bundling=cdk.BundlingOptions(
            image=cdk.DockerImage.from_registry("unused-local-bundling-only"),
            local=LocalPipBundling(python_version, platform, project_root, compiler),
        ),
    )


#: Hex digits of the asset's hash a deployment's code version keeps (decision 0048): enough to tell
#: deployments apart, short enough for every attempt entry to carry it (it is stored on each one).
CODE_VERSION_DIGITS = 12


def code_version_of(scope: Construct, code: lambda_.Code) -> str:
    """The deployment's code version (``JOBSCHED_CODE_VERSION``): the first
    :data:`CODE_VERSION_DIGITS` hex digits of the Lambda asset's hash, the name of its object in the
    assets bucket (``<hash>.zip``); for inline code (tests), of the code's own SHA-256. Binding the
    asset here stages it once in ``scope``'s stack; every function then shares that staging."""
    config = code.bind(scope)
    if config.s3_location is not None:
        digest = config.s3_location.object_key.rsplit("/", 1)[-1].split(".", 1)[0]
    else:
        digest = hashlib.sha256((config.inline_code or "").encode()).hexdigest()
    return digest[:CODE_VERSION_DIGITS]
