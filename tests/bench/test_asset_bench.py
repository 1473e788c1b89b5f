"""The asset benchmark's bookkeeping on a tiny tree: what counts as ours, as boto3's, as the rest."""

from __future__ import annotations

from pathlib import Path

from jobsched.bench.asset import READY, size_breakdown, split_runtime_copy
from jobsched.runtime.resources import FUNCTIONS


def _tree(root: Path) -> Path:
    files = {
        "jobsched/__init__.py": 10,
        "functions/worker.py": 20,
        "botocore/data/sqs.json": 300,
        "boto3/__init__.py": 40,
        "boto3-1.40.0.dist-info/METADATA": 5,
        "six.py": 7,
        "pydantic/main.py": 100,
    }
    for name, size in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x" * size)
    return root


def test_sizes_split_ours_boto3_and_the_rest(tmp_path):
    sizes = size_breakdown(_tree(tmp_path / "bundle"))
    assert sizes == {"total": 482, "ours": 30, "boto3_and_dependencies": 352, "other": 100}


def test_the_runtime_copy_moves_boto3_and_its_dependencies_out(tmp_path):
    bundle = _tree(tmp_path / "bundle")
    split_runtime_copy(bundle, tmp_path / "runtime")
    assert sorted(p.name for p in bundle.iterdir()) == ["functions", "jobsched", "pydantic"]
    assert (tmp_path / "runtime" / "botocore" / "data" / "sqs.json").is_file()
    assert (tmp_path / "runtime" / "six.py").is_file()


def test_every_function_has_its_first_event_build():
    assert sorted(READY) == sorted(spec.handler.rsplit(".", 1)[0] for spec in FUNCTIONS)
