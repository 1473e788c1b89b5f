"""The shared Lambda code asset: handlers present, dependencies bundled for arm64, handlers import.

The synthesized asset targets Lambda (aarch64 wheels for the Lambda Python version), which this x86
test machine cannot load. So the import check builds a second bundle with the *same* bundling code
for the host interpreter and imports every handler from it in an isolated interpreter (``-I -S``: no
site-packages, no environment leaks), with the function's environment from the template. A handler
that needs a library missing from requirements.txt fails here, not at its first cold start.

Development-only code (``infra.bundling.DEV_ONLY``: benchmarks, the embedded mode and its emulator
patches, the CLI, the deploy rehearsal) is not in the asset, and no module a function can import,
at import time or later (a function-level import, a route loaded on first use), is dev-only.
"""

from __future__ import annotations

import platform
import re
import subprocess
import sys
from pathlib import Path

import pytest

from infra.bundling import DEV_ONLY, LAMBDA_PYTHON_VERSION, PROJECT_ROOT, REQUIREMENTS, bundle_into
from jobsched.runtime.resources import FUNCTIONS, FunctionSpec


def _module_path(spec: FunctionSpec) -> str:
    return spec.handler.rsplit(".", 1)[0].replace(".", "/") + ".py"


def _requirement_names() -> list[str]:
    names = []
    for line in (PROJECT_ROOT / REQUIREMENTS).read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line and not line.startswith("-"):
            names.append(re.split(r"[<>=!~\[; ]", line, maxsplit=1)[0])
    return names


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


@pytest.mark.parametrize("spec", FUNCTIONS, ids=lambda s: s.name)
def test_handler_module_is_in_the_asset(synth, spec):
    assert (synth.asset_dir / _module_path(spec)).is_file(), f"{spec.handler}: {_module_path(spec)} missing"


def test_asset_holds_every_runtime_requirement(synth):
    installed = {_normalise(p.name.split("-")[0]) for p in synth.asset_dir.glob("*.dist-info")}
    missing = [name for name in _requirement_names() if _normalise(name) not in installed]
    assert missing == []


def test_asset_native_extensions_target_lambda_arm64(synth):
    tag = f"cpython-{LAMBDA_PYTHON_VERSION.replace('.', '')}-aarch64-linux-gnu"
    extensions = list(synth.asset_dir.rglob("*.so"))
    assert extensions, "expected at least pydantic_core's extension"
    wrong = [p.name for p in extensions if tag not in p.name and ".abi3." not in p.name]
    assert wrong == []


def _subpackages(root: Path) -> set[str]:
    return {p.parent.name for p in (root / "jobsched").glob("*/__init__.py")}


def test_asset_leaves_out_development_only_code(synth):
    # Given the project's jobsched subpackages, the dev-only ones among them
    in_project = _subpackages(PROJECT_ROOT)
    dev_only = {name.split(".", 1)[1] for name in DEV_ONLY}
    assert {"bench", "local", "cli"} <= in_project, "DEV_ONLY names packages this project no longer has"
    # Then the asset holds every other subpackage and none of the dev-only ones (nor any of their files)
    assert _subpackages(synth.asset_dir) == in_project - dev_only
    leaked = [p for name in dev_only for p in (synth.asset_dir / "jobsched" / name).rglob("*")]
    assert leaked == []


def _modules_reachable_from(roots: list[str]) -> set[str]:
    """Every module the given modules import, directly or not, at module level or inside a function."""
    import grimp

    graph = grimp.build_graph("jobsched", "functions", cache_dir=None)
    reachable = set(roots)
    for root in roots:
        reachable |= graph.find_upstream_modules(root)
    return reachable


def test_no_function_can_import_development_only_code():
    # Given every function's handler module / When we follow its imports (static: function-level
    # imports and the routes the API loads on first use included) / Then none reaches a dev-only module
    handlers = [spec.handler.rsplit(".", 1)[0] for spec in FUNCTIONS]
    reachable = _modules_reachable_from(handlers)
    assert "jobsched.services.worker" in reachable  # the walk does follow the imports
    dev = [m for m in sorted(reachable) if any(m == d or m.startswith(d + ".") for d in DEV_ONLY)]
    assert dev == []


def test_asset_carries_bytecode_exactly_when_python_3_14_is_here_and_warns_when_not(synth):
    # Given this machine, with or without an interpreter of the Lambda runtime's version
    from aws_cdk.assertions import Annotations, Match

    from infra.bundling import LAMBDA_PYTHON_VERSION, bytecode_interpreter

    compiler = bytecode_interpreter(LAMBDA_PYTHON_VERSION)
    # Then the synthesized asset carries our sources, with Lambda's bytecode beside them only if
    # there is one, and the stack warns at synth exactly when there is not
    assert (synth.asset_dir / "jobsched" / "runtime" / "resources.py").is_file()
    pycs = list(synth.asset_dir.rglob("*.pyc"))
    tag = f"cpython-{LAMBDA_PYTHON_VERSION.replace('.', '')}"
    assert all(p.name.endswith(f".{tag}.pyc") for p in pycs)  # never the build machine's own
    assert bool(pycs) == (compiler is not None)
    warnings = Annotations.from_stack(synth.stack).find_warning(
        "*", Match.string_like_regexp("compile the Lambda asset's bytecode")
    )
    assert len(warnings) == (0 if compiler else 1)


@pytest.fixture(scope="session")
def host_bundle(tmp_path_factory) -> Path:
    """The same bundle, built for this interpreter and machine so it can be imported here."""
    return bundle_into(
        tmp_path_factory.mktemp("host-bundle"),
        python_version=f"{sys.version_info.major}.{sys.version_info.minor}",
        platform=f"manylinux2014_{platform.machine()}",
    )


_IMPORT_CHECK = """
import importlib, sys, sysconfig
bundle = sys.argv[1]
sys.path.insert(0, bundle)
module_name, attribute = sys.argv[2].rsplit(".", 1)
handler = getattr(importlib.import_module(module_name), attribute)
assert callable(handler), f"{sys.argv[2]} is not callable"
allowed = (bundle, sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"])
outside = sorted(
    name for name, m in list(sys.modules.items())
    if getattr(m, "__file__", None) and not m.__file__.startswith(allowed)
)
assert not outside, f"imported from outside the bundle: {outside}"
"""


def _environment(synth, spec: FunctionSpec) -> dict[str, str]:
    """The function's environment from the template; unresolved names become placeholders."""
    fn = synth.template["Resources"][synth.logical_id(synth.stack.functions[spec.name])]
    env = {
        key: value if isinstance(value, str) else f"placeholder-{key.lower()}"
        for key, value in fn["Properties"]["Environment"]["Variables"].items()
    }
    return {
        **env,
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_LAMBDA_FUNCTION_NAME": spec.name,
        "PATH": "/usr/bin:/bin",
    }


@pytest.mark.parametrize("spec", FUNCTIONS, ids=lambda s: s.name)
def test_handler_imports_with_only_the_bundled_dependencies(synth, host_bundle, spec):
    # Given the handler module in the bundle / When an isolated interpreter imports it with the
    # function's environment / Then it imports, exposes a callable handler, and loads nothing else
    assert (host_bundle / _module_path(spec)).is_file(), f"{spec.handler}: {_module_path(spec)} missing"
    result = subprocess.run(
        [sys.executable, "-I", "-S", "-c", _IMPORT_CHECK, str(host_bundle), spec.handler],
        env=_environment(synth, spec),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
