"""What a handler receives: the run's identity, a heartbeat, the cancellation flag and idempotent effects.

A run executes at least once (guarantee 2): a worker may crash after the work and before the
acknowledgement, and the run is then executed again. Handlers make their external effects safe with
``ctx.idempotency_key(effect)`` (pass it to an API that deduplicates, e.g. a payment provider) or with
``ctx.idempotent(effect, fn, *args)``, which runs ``fn`` once per (run, effect) across all attempts and
returns the stored result on later attempts (Powertools idempotency on the idempotency table) — not at
most once: an attempt that dies inside ``fn`` lets a later attempt run it again once the dead attempt's
deadline has passed. When ``fn`` ran and only the save of its result fails, the save is tried again
while the attempt has time left (:data:`SAVE_TRIES`); if none gets through, ``fn``'s result is still
returned (the effect is done) and the record stays "in progress" to the attempt's deadline, so the
effect runs again only if this attempt also fails and a later one comes after that deadline.

Powertools' idempotency utility (with boto3's DynamoDB types and its persistence layers) is imported
on a handler's first ``ctx.idempotent`` call, not when the worker starts: most runs never call it,
and it was a third of the worker's cold-start import (docs/performance.md, "Lambda asset and cold
start").
"""

from __future__ import annotations

import logging
import math
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from jobsched.core.errors import RetryableError
from jobsched.core.progress import handler_progress

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer

#: Idempotency records outlive every retry schedule we allow (max backoff x attempts stays far below).
DEFAULT_EFFECT_TTL_SECONDS = 7 * 24 * 3600
EFFECT_KEY_PREFIX = "jobsched-effect"
#: Saving an effect's record again after the effect ran and the first save failed: at most this many
#: tries, the n-th ``SAVE_BACKOFF_SECONDS * n`` (at most ``SAVE_BACKOFF_MAX_SECONDS``) after the one
#: before, and none that would start after the attempt's deadline less ``SAVE_MARGIN_SECONDS``.
SAVE_TRIES = 10
SAVE_BACKOFF_SECONDS = 0.2
SAVE_BACKOFF_MAX_SECONDS = 1.0
SAVE_MARGIN_SECONDS = 1.0

logger = logging.getLogger(__name__)


class _Remaining:
    """Duck-types the Lambda context Powertools reads to expire an in-progress record: if a worker dies
    inside an effect, the next attempt may run the effect once the attempt's deadline has passed."""

    def __init__(self, remaining_ms: Callable[[], int]):
        self.get_remaining_time_in_millis = remaining_ms


#: One Powertools persistence layer per (client, table, TTL), for the client's life. Each
#: ``DynamoDBPersistenceLayer`` registers a User-Agent hook on the client it is given
#: (``register_feature_to_client``), which is never removed; the worker builds its
#: :class:`IdempotentEffects` per invocation on the container's one client, so a warm container (and
#: the embedded mode, all day) added a hook per invocation, and every DynamoDB request of that client
#: ran all of them: in ``jobsched dev`` with ten per-second jobs, 3,579 worker invocations in 48
#: minutes, so as many hooks on every request by then; the dev process at 90 % of a core and
#: ``demo.echo`` runs taking 4.5 s from claim to end (issue 12 §6).
_LAYERS: weakref.WeakKeyDictionary[Any, dict[tuple[str, int], DynamoDBPersistenceLayer]] = (
    weakref.WeakKeyDictionary()
)
_LAYERS_LOCK = threading.Lock()


def persistence_layer(dynamodb_client: Any, table_name: str, ttl_seconds: int) -> DynamoDBPersistenceLayer:
    """The persistence layer of ``table_name`` on ``dynamodb_client`` (made once, then shared)."""
    from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer

    with _LAYERS_LOCK:
        layers = _LAYERS.setdefault(dynamodb_client, {})
        layer = layers.get((table_name, ttl_seconds))
        if layer is None:
            layer = layers[(table_name, ttl_seconds)] = DynamoDBPersistenceLayer(
                table_name=table_name, boto3_client=dynamodb_client
            )
        return layer


class IdempotentEffects:
    """Runs a function once per idempotency key, storing its (JSON-serialisable) result.

    Built on Powertools ``idempotent_function`` with a ``DynamoDBPersistenceLayer`` on the idempotency
    table; the boto3 client is injected. The key is hashed by Powertools under a fixed prefix, so it is
    the same in every function and in the local mode.
    """

    def __init__(
        self,
        dynamodb_client: Any,
        table_name: str,
        ttl_seconds: int = DEFAULT_EFFECT_TTL_SECONDS,
        *,
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
    ):
        self._client = dynamodb_client
        self._table_name = table_name
        self._ttl_seconds = ttl_seconds
        self._sleep = sleep
        self._monotonic = monotonic

    @property
    def _persistence(self) -> DynamoDBPersistenceLayer:
        """The shared persistence layer (built, with the Powertools import, on the first effect)."""
        return persistence_layer(self._client, self._table_name, self._ttl_seconds)

    def run(self, key: str, fn: Callable[..., Any], *args: Any, remaining_ms: int, **kwargs: Any) -> Any:
        """Call ``fn(*args, **kwargs)`` unless an earlier call with ``key`` completed; return its result.

        An effect still in progress under another (live) attempt raises :class:`RetryableError`. When
        ``fn`` ran and its result cannot be saved, the result is returned all the same (see
        :meth:`_save_again`).
        """
        from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig, idempotent_function
        from aws_lambda_powertools.utilities.idempotency.exceptions import (
            IdempotencyAlreadyInProgressError,
            IdempotencyPersistenceLayerError,
        )

        persistence = self._persistence
        deadline = self._monotonic() + remaining_ms / 1000
        config = IdempotencyConfig(event_key_jmespath="key", expires_after_seconds=self._ttl_seconds)
        # Powertools reads only get_remaining_time_in_millis() of the context it is given.
        config.register_lambda_context(_Remaining(lambda: max(remaining_ms, 1000)))  # type: ignore[arg-type]

        done: list[Any] = []  # fn's result, once it returned

        @idempotent_function(
            data_keyword_argument="effect",
            persistence_store=persistence,
            config=config,
            key_prefix=EFFECT_KEY_PREFIX,
        )
        def _effect(effect: dict) -> Any:
            result = fn(*args, **kwargs)
            done.append(result)
            return result

        try:
            return _effect(effect={"key": key})
        except IdempotencyAlreadyInProgressError as exc:
            # An earlier attempt of this run began the effect and ended without recording it. Its
            # record stays "in progress" until that attempt's deadline, at most the run's timeout after
            # it began: retrying sooner would spend an attempt on the same answer.
            raise RetryableError(
                f"effect {key!r} is in progress under another attempt",
                retry_after_seconds=math.ceil(remaining_ms / 1000) + 1,
            ) from exc
        except IdempotencyPersistenceLayerError:
            if not done:
                raise
            # The effect ran but its record was not saved (a throttled or failed write): save it again
            # before the attempt ends, or a later attempt would run the effect a second time.
            return self._save_again(key, done[0], deadline)

    def _save_again(self, key: str, result: Any, deadline: float) -> Any:
        """Save ``result`` as ``key``'s record: up to :data:`SAVE_TRIES` tries, none starting later
        than :data:`SAVE_MARGIN_SECONDS` before ``deadline`` (the attempt's, on ``monotonic``). The
        result is returned whether a save got through or not: the effect is done, and failing the
        attempt would make the next one run it again once the record's "in progress" expired. If no
        save got through, a warning says so; the record stays "in progress" until the deadline."""
        tries = 0
        while True:
            tries += 1
            try:
                self._persistence.save_success(data={"key": key}, result=result)
                return result
            except Exception as exc:
                pause = min(SAVE_BACKOFF_SECONDS * tries, SAVE_BACKOFF_MAX_SECONDS)
                if tries >= SAVE_TRIES or self._monotonic() + pause > deadline - SAVE_MARGIN_SECONDS:
                    logger.warning(
                        "effect %r ran but its record was not saved (%d tries after the first, last: "
                        "%s); the result is returned and the record stays in progress until the "
                        "attempt's deadline",
                        key,
                        tries,
                        exc,
                    )
                    return result
                self._sleep(pause)


@dataclass
class JobContext:
    """Passed to every handler as its second argument.

    ``cancelled`` turns true when the run was cancelled (the worker reads the flag every second while
    the handler runs) or its timeout passed;
    a cooperative handler checks it at safe points and returns early. ``heartbeat(progress)`` records
    progress, ``{"done": 3, "total": 10, "unit": "rows"}`` (total and unit optional; checked here by
    :func:`jobsched.core.progress.handler_progress`, which raises :class:`ValidationError` for anything
    else); the worker's heartbeat thread writes it with the next lease extension.
    """

    run_id: str
    job_id: str
    tenant: str
    attempt: int
    max_attempts: int
    scheduled_at: datetime
    due_at: datetime
    timeout_seconds: float
    effects: IdempotentEffects | None = None
    cancel_event: threading.Event = field(default_factory=threading.Event)
    on_progress: Callable[[Any], None] | None = None
    started_monotonic: float = field(default_factory=time.monotonic)

    @property
    def cancelled(self) -> bool:
        """True once the run was cancelled or timed out: stop at the next safe point."""
        return self.cancel_event.is_set()

    def heartbeat(self, progress: Any = None) -> bool:
        """Report that the handler is alive, optionally with progress; returns ``cancelled``.
        Progress that is not ``{"done", "total"?, "unit"?}`` raises :class:`ValidationError`."""
        if progress is not None:
            checked = handler_progress(progress)
            if self.on_progress is not None:
                self.on_progress(checked)
        return self.cancelled

    def remaining_seconds(self) -> float:
        """Seconds left before this attempt's timeout."""
        return max(0.0, self.timeout_seconds - (time.monotonic() - self.started_monotonic))

    def idempotency_key(self, effect: str) -> str:
        """A key unique to this run and effect, stable across attempts: ``"<run id>:<effect>"``."""
        return f"{self.run_id}:{effect}"

    def idempotent(self, effect: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run ``fn(*args, **kwargs)`` for this run and ``effect`` and return its result; later calls
        (other attempts, redeliveries) return the stored result without running it. Not at most once:
        if an attempt dies inside ``fn`` (or its result cannot be saved and the attempt then fails for
        another reason), a later attempt runs it again once that attempt's deadline has passed
        (docs/semantics/runs.md)."""
        if self.effects is None:
            raise RuntimeError("idempotent effects need the idempotency table; none was configured")
        remaining_ms = int(self.remaining_seconds() * 1000)
        return self.effects.run(self.idempotency_key(effect), fn, *args, remaining_ms=remaining_ms, **kwargs)
