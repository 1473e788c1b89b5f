"""The Lambda asset's figures: its unzipped size, and each function's cold-start import time.

    make bench-asset                                 # = python -m jobsched.bench.asset --runs 9
    python -m jobsched.bench.asset --runs 15 --baseline main --json

Run from the project root (it bundles with :mod:`infra.bundling`, as ``cdk synth`` does). It builds:

- the asset for Lambda (Python 3.14, ``manylinux2014_aarch64``), and reports its unzipped size:
  total, our code, boto3 and what it pulls in (:data:`RUNTIME_PROVIDED`), the other dependencies;
- the same bundle for this machine's interpreter and platform, and imports each function's handler
  module from it in a fresh interpreter, ``--runs`` times: ``python -S -X importtime -c "import
  functions.worker"`` with the bundle as the working directory (``/var/task`` on Lambda: first on
  ``sys.path``), no site-packages, no bytecode written (Lambda's code directory is read-only: an
  asset without ``.pyc`` compiles what it imports at each cold start). *import* is the module's
  cumulative time as ``-X importtime`` reports it; *ready* adds building the container's services on
  the first event (what each handler builds through its seam, :mod:`jobsched.compose.seam`: settings,
  wiring, boto3 clients created, no request sent), i.e. the cold start up to the first AWS call;
- the *runtime-copy* variant (decision 0039): the same bundle without :data:`RUNTIME_PROVIDED`, which
  are put in a second directory after it on ``sys.path`` with their bytecode compiled, as the Lambda
  runtime's own copy of boto3 sits in the runtime's site-packages;
- the *bundled-bytecode* variant: the bundle as :mod:`infra.bundling` builds it when it has an
  interpreter of the target's version (here this one) — every module compiled, hash-based
  ``unchecked-hash`` bytecode — which is what the Lambda asset carries when the deploying machine has
  Python 3.14 (``infra.bundling.bytecode_interpreter``). Its extra size is reported too.

On a shared machine the wall clock mostly measures the other processes: the CPU time of the process
(``time.process_time``) is reported beside it, and is what to compare.

With ``--baseline REF`` the asset built from git ``REF`` (``git archive``) is measured too, beside
this tree's: a before/after of one change. The figures are medians over the runs; every variant's
runs are interleaved (round robin), so a load spike on a shared machine hits them alike: compare
figures of one run of the command with each other, and use ``--runs`` >= 9. Recorded in
docs/performance.md ("Lambda asset and cold start").
"""

from __future__ import annotations

import argparse
import compileall
import json
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jobsched.runtime import resources as r

#: What the Lambda Python runtime already provides: boto3 and the packages it depends on.
RUNTIME_PROVIDED = ("boto3", "botocore", "s3transfer", "jmespath", "dateutil", "six", "urllib3")
#: Distribution names of those (their ``*.dist-info`` folders).
_RUNTIME_DISTRIBUTIONS = ("boto3", "botocore", "s3transfer", "jmespath", "python_dateutil", "six", "urllib3")

#: The builder each handler module calls on its first event (what a cold start does before its first call).
READY = {
    "functions.worker": "make_worker(None)",
    "functions.api": "seam.services()",
    "functions.dispatcher": "seam.services()",
    "functions.sweeper": "seam.services()",
    "functions.dlq_consumer": "seam.services()",
}

_PROBE = """
import time
cpu, wall = time.process_time(), time.perf_counter()
import {module} as handler_module
imported = time.process_time()
handler_module.{ready}
print("CPU_MS", (imported - cpu) * 1000, (time.process_time() - cpu) * 1000)
print("READY_MS", (time.perf_counter() - wall) * 1000)
"""


def function_environment() -> dict[str, str]:
    """A deployed function's variables with made-up names: enough to build every service (no call)."""
    account = "123456789012"
    env = {
        r.ENV_JOBS_TABLE: "jobsched-jobs",
        r.ENV_RUNS_TABLE: "jobsched-runs",
        r.ENV_LEASES_TABLE: "jobsched-leases",
        r.ENV_IDEMPOTENCY_TABLE: "jobsched-idempotency",
        r.ENV_BUCKET: "jobsched-payloads",
        r.ENV_STATE_MACHINE_ARN: f"arn:aws:states:us-east-1:{account}:stateMachine:jobsched-chunked",
        "POWERTOOLS_SERVICE_NAME": "bench",
        "POWERTOOLS_METRICS_NAMESPACE": "jobsched",
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "PATH": "/usr/bin:/bin",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    for spec in r.QUEUES:
        env[spec.env_var] = f"https://sqs.us-east-1.amazonaws.com/{account}/jobsched-{spec.kind}"
        env[spec.dlq_env_var] = f"https://sqs.us-east-1.amazonaws.com/{account}/jobsched-{spec.kind}-dlq"
    return env


def tree_bytes(root: Path) -> int:
    """The unzipped size: the sum of the files' sizes (what Lambda's 250 MB limit counts)."""
    if root.is_file():
        return root.stat().st_size
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def size_breakdown(bundle: Path) -> dict[str, int]:
    """Bytes of the whole bundle, of our code, of boto3 and its dependencies, of everything else."""
    ours = sum(tree_bytes(bundle / name) for name in ("jobsched", "functions", "handlers"))
    runtime = sum(tree_bytes(p) for p in _runtime_paths(bundle))
    total = tree_bytes(bundle)
    return {"total": total, "ours": ours, "boto3_and_dependencies": runtime, "other": total - ours - runtime}


def _runtime_paths(bundle: Path) -> list[Path]:
    paths = [bundle / name for name in RUNTIME_PROVIDED if (bundle / name).exists()]
    paths += [bundle / f"{name}.py" for name in RUNTIME_PROVIDED if (bundle / f"{name}.py").exists()]
    for dist in _RUNTIME_DISTRIBUTIONS:
        paths += sorted(bundle.glob(f"{dist}-*.dist-info"))
    return paths


def split_runtime_copy(bundle: Path, runtime_dir: Path) -> None:
    """Move boto3 and its dependencies out of ``bundle`` into ``runtime_dir`` and compile them there."""
    runtime_dir.mkdir(parents=True, exist_ok=True)
    for path in _runtime_paths(bundle):
        shutil.move(str(path), runtime_dir / path.name)
    compileall.compile_dir(str(runtime_dir), quiet=1, workers=1)


@dataclass
class ImportFigures:
    """One module's times over the runs, in ms: wall clock (``-X importtime``; the import plus the
    first event's build) and CPU time of the process for both."""

    import_ms: list[float] = field(default_factory=list)
    ready_ms: list[float] = field(default_factory=list)
    import_cpu_ms: list[float] = field(default_factory=list)
    ready_cpu_ms: list[float] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        figures: dict[str, Any] = {"runs": len(self.import_ms)}
        for name in ("import_ms", "ready_ms", "import_cpu_ms", "ready_cpu_ms"):
            values = getattr(self, name)
            figures[name.replace("_ms", "_median_ms")] = round(statistics.median(values))
            figures[name.replace("_ms", "_min_ms")] = round(min(values))
        return figures


@dataclass(frozen=True)
class Variant:
    """A bundle to import from: its directory and, for the runtime-copy variant, the runtime's copy."""

    name: str
    bundle: Path
    runtime_dir: Path | None = None


def import_once(variant: Variant, module: str, figures: ImportFigures, python: str = sys.executable) -> None:
    """Import ``module`` from the variant's bundle in a fresh interpreter; add its times to ``figures``."""
    env = function_environment()
    if variant.runtime_dir is not None:
        env["PYTHONPATH"] = str(variant.runtime_dir)  # after the working directory, as on Lambda
    result = subprocess.run(
        [python, "-S", "-X", "importtime", "-c", _PROBE.format(module=module, ready=READY[module])],
        cwd=variant.bundle,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"importing {module} ({variant.name}) failed:\n{result.stderr[-3000:]}")
    pattern = rf"^import time:\s+\d+ \|\s+(\d+) \| {re.escape(module)}$"
    found = re.search(pattern, result.stderr, re.M)
    if found is None:
        raise RuntimeError(f"no -X importtime line for {module}")
    figures.import_ms.append(int(found.group(1)) / 1000)
    figures.ready_ms.append(float(result.stdout.split("READY_MS", 1)[1].split()[0]))
    import_cpu, ready_cpu = result.stdout.split("CPU_MS", 1)[1].split()[:2]
    figures.import_cpu_ms.append(float(import_cpu))
    figures.ready_cpu_ms.append(float(ready_cpu))


def measure(variants: list[Variant], modules: list[str], runs: int) -> dict[str, dict[str, Any]]:
    """Each module of each variant ``runs`` times, round robin (run 1 of every pair, then run 2...), so a
    load spike on this shared machine hits every variant alike."""
    figures = {v.name: {m: ImportFigures() for m in modules} for v in variants}
    for _ in range(runs):
        for variant in variants:
            for module in modules:
                import_once(variant, module, figures[variant.name][module])
    return {name: {m: f.summary() for m, f in per.items()} for name, per in figures.items()}


_BUNDLE_WITH_ITS_OWN_BUNDLER = """
import sys
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from infra.bundling import bundle_into
kwargs = dict(python_version=sys.argv[3], platform=sys.argv[4]) if len(sys.argv) > 3 else {}
bundle_into(Path(sys.argv[2]), project_root=Path(sys.argv[1]), **kwargs)
"""


def bundle_with_its_own_bundler(tree: Path, output: Path, *target: str) -> Path:
    """Bundle ``tree`` with the ``infra/bundling.py`` of that tree (another commit's rules)."""
    subprocess.run(
        [sys.executable, "-c", _BUNDLE_WITH_ITS_OWN_BUNDLER, str(tree), str(output), *target], check=True
    )
    return output


def _host_target() -> tuple[str, str]:
    return f"{sys.version_info.major}.{sys.version_info.minor}", f"manylinux2014_{platform.machine()}"


def export_tree(ref: str, destination: Path) -> Path:
    """The project's tree at git ``ref`` (``git archive``), to bundle a baseline from."""
    destination.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", ref], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(destination)], input=archive, check=True)
    return destination


def run(runs: int, modules: list[str], baseline: str | None = None) -> dict[str, Any]:
    from infra.bundling import bundle_into  # the project's CDK code: run this from the project root

    with tempfile.TemporaryDirectory(prefix="jobsched-asset-") as tmp:
        work = Path(tmp)
        python_version, host_platform = _host_target()

        def host_bundle(name: str, bytecode: str | None = None) -> Path:
            return bundle_into(
                work / name, python_version=python_version, platform=host_platform, bytecode=bytecode
            )

        figures: dict[str, Any] = {"python": f"{python_version} ({host_platform})"}
        sizes = size_breakdown(bundle_into(work / "lambda"))
        figures["asset_bytes"] = sizes
        figures["asset_bytes_without_boto3"] = sizes["total"] - sizes["boto3_and_dependencies"]
        split = host_bundle("split")
        split_runtime_copy(split, work / "runtime")
        host, compiled = host_bundle("host"), host_bundle("compiled", bytecode=sys.executable)
        figures["bytecode_bytes"] = tree_bytes(compiled) - tree_bytes(host)
        variants = [
            Variant("bundled", host),
            Variant("runtime_copy", split, work / "runtime"),
            Variant("bundled_bytecode", compiled),
        ]
        if baseline:
            tree = export_tree(baseline, work / "baseline-tree")
            base_lambda = bundle_with_its_own_bundler(tree, work / "baseline-lambda")
            figures["baseline"] = {"ref": baseline, "asset_bytes": size_breakdown(base_lambda)}
            base_host = bundle_with_its_own_bundler(tree, work / "baseline", python_version, host_platform)
            variants.append(Variant("baseline", base_host))
        figures["imports"] = measure(variants, modules, runs)
        return figures


def _mb(n: int) -> str:
    return f"{n / 1_000_000:.1f} MB"


def report(figures: dict[str, Any]) -> str:
    sizes = figures["asset_bytes"]
    lines = [
        f"Lambda asset, unzipped: {_mb(sizes['total'])} (ours {_mb(sizes['ours'])}, boto3 and its "
        f"dependencies {_mb(sizes['boto3_and_dependencies'])}, other dependencies {_mb(sizes['other'])}); "
        f"without boto3 and its dependencies: {_mb(figures['asset_bytes_without_boto3'])}; bytecode adds "
        f"{_mb(figures['bytecode_bytes'])} (the host bundle's, compiled as the bundler compiles the asset)",
    ]
    if "baseline" in figures:
        base = figures["baseline"]["asset_bytes"]
        lines.append(
            f"baseline {figures['baseline']['ref']}: {_mb(base['total'])} (ours {_mb(base['ours'])})"
        )
    lines.append(
        f"imports on Python {figures['python']}, median (min) ms over the runs: CPU time of the import, "
        "of the import + the first event's build; wall clock (-X importtime) of the import"
    )
    names = list(figures["imports"])
    lines.append(f"{'function':<24}" + "".join(f"{n:>36}" for n in names))
    for module in figures["imports"][names[0]]:
        row = f"{module:<24}"
        for name in names:
            f = figures["imports"][name][module]
            cell = (
                f"{f['import_cpu_median_ms']} ({f['import_cpu_min_ms']}) / "
                f"{f['ready_cpu_median_ms']} ({f['ready_cpu_min_ms']}) / {f['import_median_ms']}"
            )
            row += f"{cell:>36}"
        lines.append(row)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m jobsched.bench.asset", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--runs", type=int, default=9, help="fresh interpreters per function (median)")
    parser.add_argument("--module", action="append", choices=sorted(READY), help="only these (repeatable)")
    parser.add_argument("--baseline", metavar="GIT_REF", help="also measure the asset built from GIT_REF")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    args = parser.parse_args(argv)
    figures = run(max(1, args.runs), args.module or list(READY), args.baseline)
    print(json.dumps(figures) if args.json else report(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
