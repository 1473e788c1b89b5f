"""docs/cli.md works: its ``bash`` blocks run against a real ``jobsched dev``, its synopsis lines name
real commands and flags, and the CLI has a command for every operation of the real API.

The blocks run as the quickstart's do (tests/cli/test_quickstart.py): in order, in one shell, under
``bash -euo pipefail``, with the project's ``.venv`` on PATH and ``JOBSCHED_URL``/``JOBSCHED_TOKEN``
of the session's embedded mode exported.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from jobsched.cli.main import build_parser
from tests.cli.conftest import Embedded
from tests.cli.test_cli_coverage import CLI_FOR_OPERATION, LOCAL_EQUIVALENT

ROOT = Path(__file__).resolve().parents[2]
CLI_DOC = ROOT / "docs" / "cli.md"
BASH_BLOCK = re.compile(r"^```bash\n(.*?)^```", re.MULTILINE | re.DOTALL)
PLAIN_BLOCK = re.compile(r"^```\n(.*?)^```", re.MULTILINE | re.DOTALL)


def run_blocks(blocks: list[str], url: str, token: str, workdir: Path, timeout: float = 240):
    parts = ["set -euo pipefail", f"export JOBSCHED_URL={url} JOBSCHED_TOKEN={token}"]
    for number, block in enumerate(blocks, start=1):
        parts.append(f"printf '\\n### block {number}\\n'\n{block}")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JOBSCHED_", "AWS_"))}
    env["PATH"] = f"{ROOT / '.venv' / 'bin'}:{env.get('PATH', '/usr/bin:/bin')}"
    return subprocess.run(
        ["bash", "-c", "\n".join(parts) + "\n"],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _subparser(parser, words: list[str]):
    """The parser of ``jobsched <words...>`` and the words left over (positionals)."""
    for index, word in enumerate(words):
        actions = [a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction"]
        if not actions or word not in actions[0].choices:
            return parser, words[index:]
        parser = actions[0].choices[word]
    return parser, []


def synopsis_lines() -> list[str]:
    lines = []
    for block in PLAIN_BLOCK.findall(CLI_DOC.read_text()):
        lines += [
            line.split("#", 1)[0].strip() for line in block.splitlines() if line.startswith("jobsched ")
        ]
    return lines


def test_cli_md_has_synopses_for_every_group_and_a_session_to_run() -> None:
    groups = {line.split()[1] for line in synopsis_lines()}
    assert {"jobs", "runs", "dlq", "admin", "health", "bench"} <= groups
    assert len(BASH_BLOCK.findall(CLI_DOC.read_text())) >= 1


@pytest.mark.parametrize("line", synopsis_lines())
def test_each_synopsis_line_names_a_command_and_its_flags(line: str) -> None:
    """Given a synopsis line of docs/cli.md, Then its command exists and each --flag it shows is one
    of that command's flags"""
    words = [w for w in re.split(r"[\s\[\]()|]+", line) if w][1:]
    parser, _ = _subparser(build_parser(), [w for w in words if not w.startswith("-")])
    assert parser.prog != "jobsched", f"{line!r}: no such command"
    known = {option for action in parser._actions for option in action.option_strings}
    shown = {w.split("=", 1)[0] for w in words if w.startswith("-") and w not in ("-", "--")}
    assert shown <= known, f"{line!r}: {sorted(shown - known)} are not flags of {parser.prog}"


@pytest.mark.slow
def test_every_cli_md_command_works_against_the_embedded_mode(embedded: Embedded, tmp_path: Path) -> None:
    # Given the embedded mode, When every bash block of cli.md runs in order
    blocks = BASH_BLOCK.findall(CLI_DOC.read_text())
    result = run_blocks(blocks, embedded.url, embedded.tokens["alpha"], tmp_path)
    # Then none failed
    assert result.returncode == 0, f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    out = result.stdout
    # And what the page says about their output holds
    assert re.search(r"^ok: jobsched \S+ at http://127\.0\.0\.1:\d+, server time ", out, re.M)
    assert re.search(r"^schedule: +30 2 \* \* \*$", out, re.M)
    assert re.search(r'^retry: +\{"max_attempts": 3, "base_seconds": 5, "max_seconds": 300\}$', out, re.M)
    assert re.search(
        r"^backfilled job \S+: 3 run\(s\) from 2026-01-01T00:00:00Z to 2026-01-03T23:59:59Z$", out, re.M
    )
    assert re.search(r"^paused note: +quiet week$", out, re.M)
    assert re.search(r"^withdrew (no runs|\d+ run\(s\))", out, re.M)
    assert "exit 2: minute 61 does not exist" in out
    assert "error: validation_error: " in result.stderr
    watches = out.split("### block 1")[1]
    history = [line.split()[1] for line in watches.splitlines() if re.match(r"^\d\d:\d\d:\d\d  \w", line)]
    # the first watch follows the run live; the second prints its history: queued, running, succeeded
    assert history[-3:] == ["queued", "running", "succeeded"], history
    assert re.search(r"^deleted job \S+$", out, re.M)


@pytest.mark.slow
def test_the_cli_has_a_command_for_every_operation_of_the_real_api(embedded: Embedded) -> None:
    # Given the OpenAPI document of the running API
    paths = embedded.client("alpha").request("GET", "/openapi.json")["paths"]
    operations = {(method.upper(), path) for path, item in paths.items() for method in item}
    # Then each operation is covered by a CLI command (or answered in-process by one)
    assert operations - set(CLI_FOR_OPERATION) - set(LOCAL_EQUIVALENT) == set()
    assert set(CLI_FOR_OPERATION) | set(LOCAL_EQUIVALENT) == operations


def test_shlex_of_the_session_block_is_sane() -> None:
    """Every command of the session block parses as shell words (a doc typo fails here, fast)."""
    for block in BASH_BLOCK.findall(CLI_DOC.read_text()):
        shlex.split(block, comments=True)
