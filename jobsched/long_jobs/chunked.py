"""The user API of chunked jobs: ``@chunked_job(name)`` and the context each step receives.

A chunked job is three functions (or a class with three methods)::

    @chunked_job("reports.rebuild")
    class Rebuild:
        def plan(self, payload, ctx) -> list:            # small JSON descriptors, one per chunk
            return [{"from": i, "to": i + 1000} for i in range(0, payload["rows"], 1000)]

        def run_chunk(self, chunk, ctx):                  # runs once per chunk (at least once)
            start = (ctx.checkpoint or {}).get("next", chunk["from"])
            for row in range(start, chunk["to"]):
                ...
                ctx.save_checkpoint({"next": row + 1})   # a retried chunk resumes here
                if ctx.heartbeat():                       # True once the run was cancelled
                    return None
            return {"rows": chunk["to"] - chunk["from"]}

        def complete(self, payload, ctx, summary):        # once, after every chunk succeeded
            return {"rows": sum(o["rows"] for o in summary["outputs"])}

The job is registered in :mod:`jobsched.targets.registry` under its name like any handler, so the API
accepts ``{"handler": "reports.rebuild"}`` as a target; like any handler it has versions
(``@chunked_job("reports.rebuild", version=2, payload=..., upgrades={1: ...})``): a run binds to one
when its first attempt is claimed, and the execution's plan and completion steps run that version with
the payload upgraded to it (decision 0048). The worker recognises it (:func:`get_chunked`)
and starts a Step Functions execution instead of calling it; see :mod:`jobsched.long_jobs.chunk_runner`.
Called as a plain handler (a worker with no state machine configured) it fails permanently, saying so.
"""

from __future__ import annotations

import hashlib
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from jobsched.core.errors import PermanentError
from jobsched.targets.registry import Upgrader, get_handler, is_registered, job

PlanFn = Callable[[dict, "ChunkContext"], list]
RunChunkFn = Callable[[Any, "ChunkContext"], Any]
CompleteFn = Callable[[dict, "ChunkContext", dict], Any]

#: Step Functions execution names: 1-80 characters; CloudWatch-friendly ones use only these.
_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


class ChunkedJob:
    """A registered chunked job: its three steps. Callable only to fail clearly (see module docstring)."""

    #: Tells the handler registry (and so the API's pool check) that this handler is a chunked job.
    chunked = True

    def __init__(
        self, name: str, plan: PlanFn, run_chunk: RunChunkFn, complete: CompleteFn | None, origin: Any
    ):
        self.name = name
        self.plan = plan
        self.run_chunk = run_chunk
        self.complete = complete or _default_complete
        # The registry compares module + qualname to tell a re-import from a clash: use the origin's.
        self.__module__ = getattr(origin, "__module__", "?")
        self.__qualname__ = getattr(origin, "__qualname__", name)

    def __call__(self, payload: dict, ctx: Any) -> Any:
        raise PermanentError(
            f"{self.name!r} is a chunked job and needs Step Functions: this worker has no state machine "
            "configured (JOBSCHED_STATE_MACHINE_ARN)"
        )


def _default_complete(payload: dict, ctx: ChunkContext, summary: dict) -> dict:
    """Without a completion step the run's output is the summary (chunk count and chunk outputs)."""
    return summary


def chunked_job(
    name: str,
    *,
    plan: PlanFn | None = None,
    run_chunk: RunChunkFn | None = None,
    complete: CompleteFn | None = None,
    version: int = 1,
    payload: Any = None,
    upgrades: Mapping[int, Upgrader] | None = None,
    description: str = "",
) -> Callable[[Any], Any]:
    """Register version ``version`` of a chunked job called ``name``.

    Decorate a class whose instances have ``plan``, ``run_chunk`` and optionally ``complete``
    (instantiated once, without arguments), or decorate the ``run_chunk`` function and pass ``plan``
    (and ``complete``) as keyword arguments. ``payload``, ``upgrades`` and ``description`` are those of
    :func:`jobsched.targets.registry.job`. Returns the decorated object unchanged.
    """

    def register(target: Any) -> Any:
        if isinstance(target, type):
            instance = target()
            steps = (instance.plan, instance.run_chunk, getattr(instance, "complete", None))
        else:
            if plan is None:
                raise TypeError(f"chunked_job({name!r}) on a function needs plan=...")
            steps = (plan, target, complete)
        job(name, version=version, payload=payload, upgrades=upgrades, description=description)(
            ChunkedJob(name, *steps, origin=target)
        )
        return target

    return register


def get_chunked(name: str, version: int | None = None) -> ChunkedJob | None:
    """The chunked job registered as ``name`` at ``version`` (None: the newest), or None (not
    registered, or a plain handler)."""
    if not is_registered(name, version):
        return None
    handler = get_handler(name, version)
    return handler if isinstance(handler, ChunkedJob) else None


def chunked_handler_of(target: dict) -> ChunkedJob | None:
    """The chunked job a run's target names (``{"handler": name}``, at its pinned or bound
    ``version``), or None."""
    name = target.get("handler") if isinstance(target, dict) else None
    version = target.get("version") if isinstance(target, dict) else None
    return get_chunked(str(name), version if isinstance(version, int) else None) if name else None


def execution_name(run_id: str, generation: int = 0) -> str:
    """The Step Functions execution name of a run: deterministic, so a second start is refused.

    Run ids contain ``.`` and may be longer than 80 characters, so the name is the run id with
    unsafe characters replaced, cut to fit, plus a hash of the exact run id (two runs never share
    a name). ``generation`` is the number of replays: a replayed run gets a new execution.
    """
    digest = hashlib.sha256(f"{run_id}#{generation}".encode()).hexdigest()[:16]
    suffix = f"-r{generation}" if generation else ""
    head = _NAME_UNSAFE.sub("_", run_id)[: 80 - len(digest) - len(suffix) - 1]
    return f"{head}-{digest}{suffix}"


@dataclass
class ChunkContext:
    """What plan, run_chunk and complete receive: identity, heartbeat, cancellation, checkpoint.

    ``index``/``total`` are set for a chunk (``None`` while planning). ``checkpoint`` is the value
    the last attempt at this chunk saved (``None`` on a first attempt); ``save_checkpoint(value)``
    stores a new one at once (one small DynamoDB write), so a retried chunk resumes from it.
    ``heartbeat(progress)`` reports liveness (the worker's heartbeat thread tells Step Functions)
    and returns ``cancelled``.
    """

    run_id: str
    job_id: str
    tenant: str
    execution: str
    timeout_seconds: float
    index: int | None = None
    total: int | None = None
    checkpoint: Any = None
    cancel_event: threading.Event = field(default_factory=threading.Event)
    on_checkpoint: Callable[[Any], None] | None = None
    on_progress: Callable[[Any], None] | None = None
    started_monotonic: float = field(default_factory=time.monotonic)

    @property
    def cancelled(self) -> bool:
        """True once the run was cancelled or this step's time ran out: stop at the next safe point."""
        return self.cancel_event.is_set()

    def heartbeat(self, progress: Any = None) -> bool:
        """Report that the step is alive (progress within a chunk is optional); returns ``cancelled``."""
        if progress is not None and self.on_progress is not None:
            self.on_progress(progress)
        return self.cancelled

    def save_checkpoint(self, value: Any) -> None:
        """Store ``value`` (small JSON) as this chunk's checkpoint; a retry of the chunk starts with it."""
        if self.index is None or self.on_checkpoint is None:
            raise RuntimeError("checkpoints belong to chunks; plan and complete have none")
        self.on_checkpoint(value)
        self.checkpoint = value

    def remaining_seconds(self) -> float:
        """Seconds left before this step's timeout."""
        return max(0.0, self.timeout_seconds - (time.monotonic() - self.started_monotonic))

    def idempotency_key(self, effect: str) -> str:
        """A key unique to this run, chunk and effect, stable across retries of the chunk."""
        where = f"chunk{self.index}" if self.index is not None else "run"
        return f"{self.run_id}:{where}:{effect}"
