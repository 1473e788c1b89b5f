"""A demo chunked job, ``demo.chunked_sum``: sums numbers in chunks, slowly, with checkpoints.

Opt-in: the worker and the API load it when ``JOBSCHED_HANDLER_MODULES`` names
``jobsched.long_jobs.demo`` (the embedded mode passes that variable through), e.g.::

    JOBSCHED_HANDLER_MODULES=jobsched.long_jobs.demo jobsched dev
    jobsched jobs create --handler demo.chunked_sum --schedule 'at(...)' \\
        --payload '{"numbers": [1, 2, 3, 4, 5, 6, 7], "chunks": 3, "item_seconds": 0.5}'

Payload: ``numbers`` (list of numbers, default 1..10), ``chunks`` (how many chunks, default 3),
``item_seconds`` (pause per number, default 0.1, to watch progress and heartbeats). The run's output
is ``{"sum": ..., "chunks": n}``; the run shows ``progress = {"done": d, "total": n}`` meanwhile.
"""

from __future__ import annotations

from typing import Any

from jobsched.core.errors import ValidationError
from jobsched.long_jobs.chunked import ChunkContext, chunked_job


@chunked_job("demo.chunked_sum")
class ChunkedSum:
    """Each chunk carries its slice of numbers and the pause per number (a small descriptor)."""

    def plan(self, payload: dict, ctx: ChunkContext) -> list[dict]:
        numbers = payload.get("numbers", list(range(1, 11)))
        count = int(payload.get("chunks", 3))
        if not isinstance(numbers, list) or count < 1:
            raise ValidationError("demo.chunked_sum needs a list of numbers and chunks >= 1")
        size = -(-len(numbers) // count) if numbers else 1
        pause = float(payload.get("item_seconds", 0.1))
        return [{"numbers": numbers[i : i + size], "pause": pause} for i in range(0, len(numbers), size)]

    def run_chunk(self, chunk: dict, ctx: ChunkContext) -> dict[str, Any]:
        """Add the numbers one by one, checkpointing after each, so a retry resumes where it stopped."""
        state = ctx.checkpoint or {"next": 0, "sum": 0}
        numbers = chunk["numbers"]
        for position in range(state["next"], len(numbers)):
            if ctx.cancel_event.wait(chunk["pause"]) or ctx.heartbeat():
                return {"sum": state["sum"], "cancelled": True}
            state = {"next": position + 1, "sum": state["sum"] + numbers[position]}
            ctx.save_checkpoint(state)
        return {"sum": state["sum"]}

    def complete(self, payload: dict, ctx: ChunkContext, summary: dict) -> dict[str, Any]:
        return {"sum": sum(o["sum"] for o in summary["outputs"]), "chunks": summary["chunks"]}
