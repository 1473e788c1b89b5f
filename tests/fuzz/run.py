"""Run schemathesis against a running API: ``python -m tests.fuzz.run <url> <token> [--examples N]``.

Every check, every phase (examples, coverage, fuzzing, stateful), the hooks of :mod:`tests.fuzz.hooks`
and the settings of ``tests/fuzz/schemathesis.toml``. Exit status 0 means a clean run. ``make fuzz``
runs it with more examples, and the coverage phase, which the test in ``make test`` leaves out.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SCHEMATHESIS = Path(sys.executable).with_name("schemathesis")
#: The variable ``schemathesis.toml`` reads the bearer token from.
TOKEN_ENV = "JOBSCHED_FUZZ_TOKEN"


#: Every phase (``make fuzz``); the test in ``make test`` leaves out the coverage phase (decision 0025).
ALL_PHASES = "examples,coverage,fuzzing,stateful"


def command(
    url: str, *, examples: int, seed: int | None, max_time: float | None, phases: str = ALL_PHASES
) -> list[str]:
    argv = [
        str(SCHEMATHESIS),
        "--config-file",
        str(HERE / "schemathesis.toml"),
        "run",
        f"{url}/openapi.json",
        "--checks",
        "all",
        "--phases",
        phases,
        "--max-examples",
        str(examples),
        "--workers",
        "1",
        "--generation-database",
        "none",
        "--request-timeout",
        "30",
        "--no-color",
    ]
    if seed is not None:
        argv += ["--seed", str(seed)]
    if max_time is not None:
        argv += ["--max-time", str(max_time)]
    return argv


def run(
    url: str,
    token: str,
    *,
    examples: int,
    seed: int | None = None,
    max_time: float | None = None,
    timeout: float | None = None,
    phases: str = ALL_PHASES,
) -> subprocess.CompletedProcess[str]:
    # The document is generated on its first request; fetch it once so schemathesis's 10 s schema
    # timeout never meets a busy machine's first generation.
    with urllib.request.urlopen(f"{url}/openapi.json", timeout=120) as response:
        response.read()
    # The token goes through the document's `bearer` scheme (schemathesis.toml), not a fixed header: the
    # coverage phase's requests without credentials must really go without them.
    env = {**os.environ, "SCHEMATHESIS_HOOKS": "tests.fuzz.hooks", "PYTHONPATH": str(ROOT), TOKEN_ENV: token}
    return subprocess.run(
        command(url, examples=examples, seed=seed, max_time=max_time, phases=phases),
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("token")
    parser.add_argument("--examples", type=int, default=200, help="test cases per operation (default 200)")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--max-time", type=float, default=None, help="seconds for the whole run")
    args = parser.parse_args(argv)
    result = run(args.url, args.token, examples=args.examples, seed=args.seed, max_time=args.max_time)
    sys.stdout.write(result.stdout)
    sys.stderr.write(result.stderr)
    return result.returncode


if __name__ == "__main__":
    sys.exit(main())
