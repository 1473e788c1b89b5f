"""Handlers of the container-pool end-to-end tests (tests/local/test_e2e_container.py), imported by the
embedded mode's processes through ``JOBSCHED_HANDLER_MODULES=tests.local.container_handlers``.

``e2e.long_work`` charges once per run (an idempotent effect: a line appended to the file its payload
names), then works ``seconds`` in steps, reporting progress, until done or told to stop.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from jobsched.targets.registry import job


def _append(path: str, line: str) -> str:
    with Path(path).open("a") as out:
        out.write(line + "\n")
    return line


@job("e2e.long_work")
def long_work(payload: dict, ctx: Any) -> dict:
    ctx.idempotent("charge", _append, payload["effects"], f"{ctx.run_id} attempt {ctx.attempt}")
    Path(payload["effects"] + ".started").write_text(str(ctx.attempt))
    seconds = float(payload["seconds"])
    started = time.monotonic()
    while (spent := time.monotonic() - started) < seconds:
        if ctx.heartbeat({"done": int(spent), "total": int(seconds), "unit": "s"}):
            return {"stopped_after": spent, "attempt": ctx.attempt}
        time.sleep(0.2)
    return {"worked": seconds, "attempt": ctx.attempt}
