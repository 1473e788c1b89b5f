"""Where a run's log lines are, and, in the embedded mode, the lines themselves.

Every line written while a run executes carries its ``run_id`` (:mod:`jobsched.runtime.observability`).
On AWS the lines are in the worker function's CloudWatch log group; the run view names it and gives a
Logs Insights query for the run (:meth:`RunLogs.link`). The embedded mode writes the same JSON lines
to its log file; :meth:`RunLogs.lines` reads that file for ``GET /runs/{id}/logs``, a route that
answers only there (a deployment without a log file answers 404 with where to look instead).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jobsched.core.errors import NotFoundError

#: Lines returned at most by ``GET /runs/{id}/logs`` (the oldest first; ``truncated`` says so).
MAX_LINES = 5000


def insights_query(run_id: str) -> str:
    """A CloudWatch Logs Insights query for every line of the run, oldest first."""
    quoted = json.dumps(run_id)
    return (
        "fields @timestamp, level, message, attempt, @logStream"
        f" | filter run_id = {quoted} | sort @timestamp asc | limit 10000"
    )


@dataclass(frozen=True)
class RunLogs:
    """The deployment's log locations: the worker's log group (AWS) or the log file (embedded mode)."""

    log_group: str | None = None
    log_file: str | None = None

    def link(self, run_id: str) -> dict[str, Any]:
        """The run view's ``logs``: ``log_group``, ``insights_query``, and ``lines`` (the path of the
        lines route when this deployment serves it, else null)."""
        return {
            "log_group": self.log_group,
            "insights_query": insights_query(run_id),
            "lines": f"/runs/{run_id}/logs" if self.log_file else None,
        }

    def lines(self, run_id: str) -> dict[str, Any]:
        """The run's JSON log lines from the embedded mode's log file, oldest first."""
        if not self.log_file:
            where = (
                f"CloudWatch Logs group {self.log_group}, with the run's logs.insights_query"
                if self.log_group
                else "the functions' output"
            )
            raise NotFoundError(
                "this deployment keeps no run log lines to serve (GET /runs/{id}/logs answers only in "
                f"the embedded mode, jobsched dev without --verbose); the run's lines are in {where}"
            )
        found: list[dict[str, Any]] = []
        truncated = False
        path = Path(self.log_file)
        if path.exists():
            with path.open(encoding="utf-8", errors="replace") as lines:
                for line in lines:
                    if run_id not in line:  # cheap pre-filter before parsing
                        continue
                    try:
                        record = json.loads(line)
                    except ValueError:
                        continue
                    if isinstance(record, dict) and record.get("run_id") == run_id:
                        if len(found) >= MAX_LINES:
                            truncated = True
                            break
                        found.append(record)
        return {"run_id": run_id, "items": found, "truncated": truncated}
