"""docs/local.md works: each command of its first ``sh`` block is run and does what the page says.

``make run ...`` lines are checked through ``make -n`` (the command they run); each ``jobsched dev
...`` line is started for real (on a free API port instead of the page's 8080), from a project
directory holding the page's ``handlers/billing.py``, with the page's ``bash`` block then run against
it; the event-line format the page shows is checked on the real output.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from jobsched.cli.client import ApiClient, ApiError
from tests.local.devproc import DevProcess

ROOT = Path(__file__).resolve().parents[2]
LOCAL_DOC = ROOT / "docs" / "local.md"


def _blocks(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", LOCAL_DOC.read_text(), re.MULTILINE | re.DOTALL)


def _commands() -> list[str]:
    return [line.split("  #", 1)[0].strip() for line in _blocks("sh")[0].splitlines() if line.strip()]


def test_the_page_starts_with_make_run_and_jobsched_dev_lines() -> None:
    commands = _commands()
    assert commands[0] == "make run"
    assert any(c.startswith("jobsched dev") for c in commands)


@pytest.mark.parametrize("line", [c for c in _commands() if c.startswith("make run")])
def test_each_make_run_line_runs_jobsched_dev_with_the_options_it_names(line: str) -> None:
    """Given a `make run ...` line of the page, When make shows what it runs (make -n),
    Then it is `.venv/bin/jobsched dev --port <PORT>` followed by the DEV_ARGS given"""
    words = shlex.split(line)
    variables = dict(w.split("=", 1) for w in words[2:])
    # As a user's shell would run it: not as a sub-make of `make test` (whose MAKEFLAGS/MAKELEVEL
    # make a nested make print "Entering/Leaving directory" lines around the command).
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
    shown = subprocess.run(
        ["make", "--no-print-directory", "-n", "-W", ".venv/.installed-stamp", "run", *words[2:]],
        cwd=ROOT, capture_output=True, text=True, check=True, env=env,
    ).stdout.strip().splitlines()[-1]  # fmt: skip
    expected = (
        f".venv/bin/jobsched dev --port {variables.get('PORT', '8080')} {variables.get('DEV_ARGS', '')}"
    )
    assert shown.split() == expected.split()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project directory with the page's handlers/billing.py."""
    (tmp_path / "handlers").mkdir()
    (tmp_path / "handlers" / "__init__.py").write_text("")
    (tmp_path / "handlers" / "billing.py").write_text(_blocks("python")[0])
    return tmp_path


@pytest.mark.slow
@pytest.mark.parametrize("line", [c for c in _commands() if "jobsched dev" in c])
def test_each_jobsched_dev_line_starts_serves_and_stops(line: str, project: Path) -> None:
    # Given the page's command, on a free API port, started from the project directory
    words = shlex.split(line)
    env = dict(w.split("=", 1) for w in words[: words.index("jobsched")])
    args = words[words.index("dev") + 1 :]
    if "--port" in args:
        del args[args.index("--port") : args.index("--port") + 2]
    tenants = "--tenant" in args
    dev = DevProcess(*args, *([] if tenants else ["--tenant", "doc=doc-token"]), env=env, cwd=project)
    try:
        dev.wait_for_line("run events", timeout=90)
        banner = "\n".join(dev.lines)
        # Then the banner shows what the page lists
        for label in ("docs ", "AWS ", "DynamoDB ", "tenant ", "logs "):
            assert f"  {label}" in banner, banner
        if tenants:
            assert "tenant    acme  token s3cret" in banner and "tenant    beta  token t0ken" in banner
        if "JOBSCHED_HANDLER_MODULES" in env:
            # And the page's bash block runs against it: the handler is known, a typo is refused with 422
            token = "doc-token"
            script = (
                f"set -euo pipefail\nexport JOBSCHED_URL={dev.url} JOBSCHED_TOKEN={token}\n"
                + _blocks("bash")[0]
            )
            child_env = {k: v for k, v in os.environ.items() if not k.startswith(("JOBSCHED_", "AWS_"))}
            child_env["PATH"] = f"{Path(sys.executable).parent}:{child_env.get('PATH', '')}"
            result = subprocess.run(
                ["bash", "-c", script], cwd=project, env=child_env, capture_output=True, text=True, timeout=60
            )
            assert result.returncode == 0, result.stderr
            assert "refused, as it should" in result.stdout
            assert (
                "error: validation_error: unknown handler 'billing.invoce': "
                "register it with @job('billing.invoce')" in result.stderr
            )
            with pytest.raises(ApiError) as refused:
                ApiClient(dev.url, token=token).create_job(
                    {"name": "t", "schedule": "@daily", "target": {"handler": "billing.invoce"}}
                )
            assert refused.value.status == 422
            # And the event lines have the page's shape: time, event, padded name, run id
            job_id = result.stdout.split()[0]
            trigger = ["jobs", "trigger", job_id, "--url", dev.url, "--token", token]
            subprocess.run(
                [sys.executable, "-m", "jobsched.cli", *trigger],
                check=True,
                capture_output=True,
                env=child_env,
            )
            line = dev.wait_for_line("succeeded  invoices", timeout=60)
            assert re.match(r"^\d\d:\d\d:\d\d  succeeded  invoices {10}\S+$", line), line
        code, _ = dev.stop()
    finally:
        dev.kill()
    assert code == 0
