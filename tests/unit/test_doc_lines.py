"""Doc lines that were not true (issue 27 §4), each held to what the code does.

Where the truth is a number or a name in the code, the doc's figure is read and compared with it; where
it is a property shown by another test (named), the false wording is checked to be gone, so a copy of
the old line cannot come back unnoticed. The alarm-metric count is checked against the synthesized
template in tests/infra/test_observability.py, the unknown-handler status against the API in
tests/api/test_doc_claims.py.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from jobsched.aws.outputs import INLINE_OUTPUT_LIMIT
from jobsched.cli.main import build_parser
from jobsched.core.messages import MAX_PAYLOAD_BYTES

ROOT = Path(__file__).resolve().parents[2]


def text(path: str) -> str:
    """A file's text with its whitespace runs folded to one space (lines wrap anywhere)."""
    return " ".join((ROOT / path).read_text().split())


def test_the_runbook_names_the_per_tenant_limits_command_that_exists():
    """Given operations.md's runbook for an old queue message (a tenant flooding a queue), Then it no
    longer says per-tenant limits are not built, and the command it gives parses with its flags."""
    runbook = text("docs/operations.md")
    assert "not built yet" not in runbook
    (command,) = re.findall(r"`(jobsched admin limits set [^`]+)`", runbook)
    # the page's placeholders: T a tenant, N a number of runs, R runs per second
    words = [{"T": "acme", "N": "5", "R": "2"}.get(w, w) for w in command.split()[1:]]
    args = build_parser().parse_args(words)
    assert (args.tenant, args.max_running, args.runs_per_second) == ("acme", 5, 2)


@pytest.mark.parametrize(
    ("path", "false"),
    [
        # ctx.idempotent: an attempt that dies inside the effect lets a later one run it again
        # (tests/aws/test_effect_faults.py), so it is not "at most once"
        ("docs/semantics/runs.md", "runs `fn` at most once"),
        ("jobsched/targets/context.py", "at most once for this run"),
        # notifications are delivered at least once; receivers deduplicate by the notification's id
        ("README.md", "notify the job's owners once per dead letter"),
        # an edit rewrites the runs queued ahead (tests/services/test_edits_queued_ahead.py)
        ("jobsched/core/messages.py", "does not change a run already queued"),
        # the long queue has a concurrency ceiling on the shared worker function, nothing reserved
        # (tests/infra: only WorkerHigh has ReservedConcurrentExecutions)
        ("jobsched/long_jobs/asl.py", "``long`` queue's reserved concurrency"),
        # the whole suite took 19 min 20 s from a fresh clone on two cores
        ("README.md", "about ten minutes on two cores"),
        # plain handlers report progress too (docs/semantics/runs.md, "Handlers")
        ("docs/api.md", "`progress` (chunked runs: `{done, total}`)"),
    ],
)
def test_a_line_that_was_not_true_is_gone(path, false):
    assert false not in text(path)


def test_the_bucket_row_names_what_goes_there_with_the_codes_limits():
    """Given deploy.md's outputs table, Then the bucket is for outputs over the inline limit, not for
    payloads, and the sizes it gives are the code's (payloads inline up to MAX_PAYLOAD_BYTES)."""
    (row,) = [
        line
        for line in (ROOT / "docs/deploy.md").read_text().splitlines()
        if line.startswith("| `PayloadBucket` |")
    ]
    assert "large payloads" not in row and "payloads never go there" in row
    assert (
        f"over {INLINE_OUTPUT_LIMIT // 1024} KiB" in row and f"at most {MAX_PAYLOAD_BYTES // 1024} KiB" in row
    )


def test_readme_says_notifications_are_at_least_once():
    assert "of each dead letter at least once" in text("README.md")
