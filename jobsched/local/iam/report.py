"""``make iam-report``: the recorded calls checked against each function's role, and every grant no
call used with its disposition (:mod:`jobsched.local.iam.dispositions`).

    python -m jobsched.local.iam.report --calls DIR --template aws=cdk.out/Jobsched.template.json \\
        --template cmk=cdk.out.cmk/Jobsched.template.json

``--calls`` (repeatable; a missing directory is skipped) is a directory of recordings (one file per
process, :mod:`jobsched.local.iam.recorder`).
Exit status 1 when a call is denied, a call was not attributed, or an unused grant has no disposition.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from jobsched.local.iam.dispositions import Context, Disposition, disposition_of
from jobsched.local.iam.evaluation import Evaluation, Grant, evaluate_recording
from jobsched.local.iam.recorder import Recording
from jobsched.local.iam.template import read_roles


@dataclass
class VariantReport:
    variant: str
    evaluation: Evaluation
    dispositions: dict[Grant, Disposition | None]

    @property
    def unjustified(self) -> list[Grant]:
        return [g for g, d in self.dispositions.items() if d is None]


def check(recording: Recording, template: dict, variant: str) -> VariantReport:
    """``recording`` against the roles of ``template``; the disposition of each unused grant."""
    roles = read_roles(template)
    evaluation = evaluate_recording(recording, roles)
    context = Context(used=frozenset(evaluation.used), consumed=frozenset(roles.consumed))
    return VariantReport(variant, evaluation, {g: disposition_of(g, context) for g in evaluation.unused})


def render(recording: Recording, reports: Sequence[VariantReport]) -> str:
    functions = sorted({f for f, _, _ in recording.triples})
    lines = [
        f"calls recorded: {recording.calls}  distinct (function, action, resource): "
        f"{len(recording.triples)}  functions: {', '.join(functions)}",
        f"unattributed calls: {sum(recording.unattributed.values())}"
        + "".join(f"\n  {detail} x{n}" for detail, n in sorted(recording.unattributed.items())),
    ]
    for report in reports:
        ev = report.evaluation
        implied = sum(1 for c in ev.checked if c.implied_by)
        by_disposition: dict[str, int] = defaultdict(int)
        for d in report.dispositions.values():
            by_disposition[d.kind if d else "UNJUSTIFIED"] += 1
        lines.append(
            f"\n[encryption={report.variant}] requests checked: {len(ev.checked)} ({implied} implied key "
            f"actions)  denied: {len(ev.denied)}  grants: {ev.total_grants}, unused: {len(ev.unused)} "
            f"({', '.join(f'{k} {n}' for k, n in sorted(by_disposition.items()))})"
        )
        lines += [
            f"  DENIED {c.function}: {c.action} on {c.resource} ({c.decision.value})"
            + (f" [implied by {c.implied_by}]" if c.implied_by else "")
            for c in ev.denied
        ]
        lines += [f"  NO ROLE for function {f}" for f in sorted(set(ev.missing_roles))]
        lines += _unused_lines(report)
    return "\n".join(lines)


def _by_kind(item: tuple[tuple[str, str, str, tuple[str, ...]], list[str]]) -> tuple[str, str]:
    (resource, kind, _, _), _ = item
    return kind, resource


def _unused_lines(report: VariantReport) -> list[str]:
    """Unused grants, compact: one line per (resource, disposition, actions) with the functions."""
    per_function: dict[tuple[str, str, str, str], list[str]] = defaultdict(list)
    for grant, d in report.dispositions.items():
        kind, reason = (d.kind, d.reason) if d else ("UNJUSTIFIED", "no disposition")
        per_function[(grant.function, grant.resource, kind, reason)].append(grant.action)
    merged: dict[tuple[str, str, str, tuple[str, ...]], list[str]] = defaultdict(list)
    for (function, resource, kind, reason), actions in per_function.items():
        merged[(resource, kind, reason, tuple(sorted(actions)))].append(function)
    return [
        f"  unused {', '.join(actions)} on {resource} [{', '.join(sorted(functions))}]: {kind}: {reason}"
        for (resource, kind, reason, actions), functions in sorted(merged.items(), key=_by_kind)
    ]


def failed(recording: Recording, reports: Sequence[VariantReport]) -> bool:
    return bool(
        recording.unattributed
        or any(r.evaluation.denied or r.evaluation.missing_roles or r.unjustified for r in reports)
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--calls",
        action="append",
        required=True,
        help="a directory of recordings (IAM_CALLS_DIR); repeatable",
    )
    parser.add_argument("--template", action="append", required=True, metavar="VARIANT=PATH")
    args = parser.parse_args(argv)
    recording = Recording.load_dir(*[d for d in args.calls if Path(d).is_dir()])
    if not recording.calls:
        print(f"no calls recorded in {args.calls}", file=sys.stderr)
        return 1
    reports = []
    for spec in args.template:
        variant, _, path = spec.partition("=")
        reports.append(check(recording, json.loads(Path(path).read_text()), variant))
    print(render(recording, reports))
    return 1 if failed(recording, reports) else 0


if __name__ == "__main__":
    raise SystemExit(main())
