"""Pools: where a run executes, and the one function that picks its queue. Pure.

A job (and each node of a workflow) names its ``pool`` (docs/pools.md, decision 0053):

* ``lambda``: the worker functions, one queue per priority (``high``, ``default``, ``low``);
  timeouts up to Lambda's limit (:data:`LAMBDA_TIME_LIMIT_SECONDS`, lowered in the embedded mode);
* ``long``: the ``long`` queue and its own function, with its own capacity; the same timeouts;
* ``container``: the ``container`` queue, consumed by container workers running the same worker
  loop; timeouts up to :data:`MAX_CONTAINER_TIMEOUT_SECONDS` (SQS's longest visibility timeout).

A job that does not name one gets :func:`default_pool`: ``container`` when its timeout is beyond the
Lambda limit, else ``lambda``; a chunked job gets ``long`` (its chunks are long work; ``lambda`` is
refused for it). Every message of a run, from its first send to a dead letter's replay, goes to
:func:`queue_for` its pool and priority, so a run never leaves its pool.

The vocabulary mirrors :mod:`jobsched.runtime.resources` (``POOLS``, the queue kinds, the limits),
which infra/ and the local mode read; tests/unit/test_pools.py keeps the two equal.
"""

from __future__ import annotations

from typing import Any

from jobsched.core.errors import ValidationError

LAMBDA_POOL = "lambda"
LONG_POOL = "long"
CONTAINER_POOL = "container"
POOLS = (LAMBDA_POOL, LONG_POOL, CONTAINER_POOL)
#: The pools a chunked job's chunks may run on (``long`` unless it names ``container``).
CHUNK_POOLS = (LONG_POOL, CONTAINER_POOL)
#: Lambda's own limit on an invocation: the longest timeout on the ``lambda`` and ``long`` pools.
LAMBDA_TIME_LIMIT_SECONDS = 900
#: The longest timeout on the ``container`` pool: SQS's maximum visibility timeout (12 hours).
MAX_CONTAINER_TIMEOUT_SECONDS = 12 * 3600
#: The queue kinds outside the priorities: one queue each for the long and the container pool.
LONG_QUEUE = "long"
CONTAINER_QUEUE = "container"


def queue_for(pool: str | None, priority: str) -> str:
    """The queue kind a run of ``pool`` and ``priority`` is sent to: its priority's queue on the
    ``lambda`` pool (``None``, a run or message written before runs had pools, is ``lambda``), the
    pool's own queue on ``long`` and ``container`` (priority is kept on the run, but orders nothing
    there). The one place a queue is chosen for a run."""
    if pool == LONG_POOL:
        return LONG_QUEUE
    if pool == CONTAINER_POOL:
        return CONTAINER_QUEUE
    if pool not in (None, LAMBDA_POOL):
        raise ValueError(f"unknown pool {pool!r}")
    return priority


def chunk_queue_for(pool: str | None) -> str:
    """The queue kind a chunked run's plan, chunk and completion tasks go to: ``container`` on the
    container pool, else ``long`` (a chunked job written before jobs had pools kept its chunks there)."""
    return CONTAINER_QUEUE if pool == CONTAINER_POOL else LONG_QUEUE


def max_timeout(pool: str, time_limit: int = LAMBDA_TIME_LIMIT_SECONDS) -> int:
    """The longest timeout a run on ``pool`` may have (``time_limit``: the deployment's Lambda limit)."""
    return MAX_CONTAINER_TIMEOUT_SECONDS if pool == CONTAINER_POOL else time_limit


def default_pool(
    timeout_seconds: Any, time_limit: int = LAMBDA_TIME_LIMIT_SECONDS, *, chunked: bool = False
) -> str:
    """The pool of a job (or node) that names none: ``long`` for a chunked job, ``container`` when its
    timeout is beyond ``time_limit``, else ``lambda``. A timeout that is not a number is left for the
    timeout check to refuse (``lambda``)."""
    if chunked:
        return LONG_POOL
    over = (
        isinstance(timeout_seconds, int)
        and not isinstance(timeout_seconds, bool)
        and timeout_seconds > time_limit
    )
    return CONTAINER_POOL if over else LAMBDA_POOL


def check_pool(pool: Any, field: str = "pool", *, where: str = "") -> str:
    """``pool`` if it is one of :data:`POOLS`, else a 422 naming ``field`` and the allowed values."""
    if not isinstance(pool, str) or pool not in POOLS:
        raise ValidationError(f"{where}{field} {pool!r} is not allowed: use {', '.join(POOLS)}", field=field)
    return pool


def check_timeout(
    timeout: Any,
    pool: str,
    time_limit: int = LAMBDA_TIME_LIMIT_SECONDS,
    *,
    field: str = "timeout_seconds",
    where: str = "",
) -> None:
    """A 422 naming ``field`` unless ``timeout`` is a whole number of seconds in 1..the pool's limit;
    a timeout over the Lambda limit on ``lambda`` or ``long`` says to set ``pool`` to ``container``."""
    high = max_timeout(pool, time_limit)
    if isinstance(timeout, bool) or not isinstance(timeout, int) or not 1 <= timeout <= high:
        hint = ""
        if (
            pool != CONTAINER_POOL
            and isinstance(timeout, int)
            and not isinstance(timeout, bool)
            and time_limit < timeout <= MAX_CONTAINER_TIMEOUT_SECONDS
        ):
            hint = (
                f": {timeout} s is beyond Lambda's {time_limit} s limit on the {pool} pool; set pool to "
                f"{CONTAINER_POOL!r} (timeouts up to {MAX_CONTAINER_TIMEOUT_SECONDS} s)"
            )
        raise ValidationError(
            f"{where}{field} must be a whole number between 1 and {high} on the {pool} pool, "
            f"got {timeout!r}{hint}",
            field=field,
        )


def check_chunk_pool(pool: str) -> None:
    """A chunked job runs its chunks on ``long`` or ``container``: ``lambda`` is a 422 naming ``pool``."""
    if pool not in CHUNK_POOLS:
        raise ValidationError(
            f"pool {pool!r} is not allowed for a chunked job (its chunks are long work): use "
            f"{', '.join(CHUNK_POOLS)}",
            field="pool",
        )
