"""The DLQ consumer: a run message SQS gave up on (received ``maxReceiveCount`` times without being
acknowledged: a worker that crashed on it each time, a message no worker can parse) is recorded as a
failed run with reason ``poison``, so it shows in the dead letters and can be replayed (guarantee 4).

A redriven message whose run already ended is acknowledged without a write; one whose run is held by a
live lease is left in the DLQ for a later look (the owner may still finish it).
"""

from __future__ import annotations

import json
import logging
from datetime import datetime

from jobsched.core.errors import ConflictError, ValidationError
from jobsched.core.messages import RunMessage
from jobsched.core.models import ACTIVE_RUN_STATES, Run, RunState, parse_run_id
from jobsched.ports.stores import AttemptRecords
from jobsched.runtime import observability as obs
from jobsched.services.outcome import Outcome

logger = logging.getLogger(__name__)


class DlqConsumer:
    """Records poison run messages as failed runs (stores and metrics injected)."""

    def __init__(self, attempts: AttemptRecords, metrics: obs.MetricSink | None = None):
        self.attempts = attempts
        self.metrics = metrics or obs.NullSink()

    def process(self, body: str, now: datetime, *, receive_count: int | None = None) -> Outcome:
        """Handle one message from a DLQ at ``now``."""
        self.metrics.add(obs.POISON_MESSAGES)
        try:
            parsed = RunMessage.from_json(body)
            msg: RunMessage | None = parsed
            run_id = parsed.run_id
            problem = (
                f"the message for attempt {parsed.attempt} was received {receive_count or 'too many'} times"
            )
            problem += " without completing; SQS moved it to the dead-letter queue"
        except ValidationError as exc:
            named = _run_id_of(body)
            problem = f"the run's message is malformed ({exc.message}); SQS moved it to the dead-letter queue"
            if named is None:
                logger.error("unidentifiable message in a DLQ, dropped: %.500s", body)
                return Outcome("unidentified")
            msg, run_id = None, named
        item = self.attempts.get_item(run_id)
        if item is None:
            return Outcome("missing", run_id)
        run = Run.from_item(item)
        if run.state not in ACTIVE_RUN_STATES:
            return Outcome("finished", run_id, run.attempt)
        if run.state is RunState.RUNNING and run.lease_until is not None and run.lease_until > now:
            return Outcome("busy", run_id, run.attempt, defer=True)
        # The dead letter's snapshot names the version the run is bound to, so a replay runs it (0048).
        snapshot = msg.bound_to(run.handler_version).to_json() if msg else None
        try:
            self.attempts.fail_unclaimed(run, now, problem, "poison", snapshot)
        except ConflictError:
            return Outcome("stale", run_id, run.attempt, defer=True)  # it moved: look again
        self.metrics.add(obs.RUNS_FAILED)
        self.metrics.add(obs.RUNS_DEAD_LETTERED)
        return Outcome("dead_lettered", run_id, run.attempt, detail={"reason": "poison", "error": problem})


def _run_id_of(body: str) -> str | None:
    """The run id of a message too broken to parse fully, if it names a valid one."""
    try:
        data = json.loads(body)
        run_id = data.get("run_id") if isinstance(data, dict) else None
        parse_run_id(run_id or "")
    except (ValueError, ValidationError):
        return None
    return run_id
