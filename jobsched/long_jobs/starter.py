"""Starting a chunked run: one Step Functions execution per run, named after it.

The execution name is derived from the run id (and the number of replays), so a second start of the
same run, from a duplicate delivery or from a worker that took the run over after its lease expired,
cannot create a second execution: Step Functions answers the same execution (same name and input,
still running) or ``ExecutionAlreadyExists`` (closed, or other input). The input is the run message
with its delivery details (attempt, due instant) normalised away, so every start sends the same one,
and the URL of the queue its chunks go to (``queue_url``: the container queue for a run on the
container pool, else the long queue; :func:`jobsched.core.pools.chunk_queue_for`).

If the execution already ended while the run did not (the run's last write was lost), the run takes
the execution's ending: succeeded with the completion output, or failed and dead-lettered.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any

from jobsched.aws.attempts import Claim
from jobsched.aws.sizing import Meter
from jobsched.aws.step_functions import StepFunctions
from jobsched.core.errors import LeaseLostError
from jobsched.core.messages import RunMessage
from jobsched.core.pools import chunk_queue_for
from jobsched.long_jobs.asl import start_transitions
from jobsched.long_jobs.chunked import ChunkedJob, execution_name
from jobsched.long_jobs.parent import ParentStore
from jobsched.runtime import observability as obs
from jobsched.services.outcome import Outcome


class ExecutionStarter:
    """Starts executions for claimed chunked runs (clients and stores injected)."""

    def __init__(
        self,
        parents: ParentStore,
        stepfunctions: Any,
        state_machine_arn: str,
        owner: str,
        metrics: Any,
        *,
        queue_urls: Mapping[str, str] | None = None,
        meter: Meter | None = None,
    ):
        self.meter = meter
        self.parents = parents
        self.queue_urls = dict(queue_urls or {})
        self.sfn = StepFunctions.of(stepfunctions)
        self.state_machine_arn = state_machine_arn
        self.owner = owner
        self.metrics = metrics

    def execution_arn(self, name: str) -> str:
        return self.state_machine_arn.replace(":stateMachine:", ":execution:", 1) + ":" + name

    def start(self, msg: RunMessage, claim: Claim, job: ChunkedJob, now: datetime) -> Outcome:
        """Start (or find) the run's execution and hand the run over to it."""
        run = claim.run
        assert run is not None
        name = execution_name(run.id, len(run.replays))
        snapshot = _snapshot(msg, run.payload_override)
        execution_input = {
            "run_id": run.id,
            "job_id": run.job_id,
            "tenant": run.tenant,
            "message": snapshot.to_dict(),
        }
        # The chunk queue of the run's pool (the state machine sends every task there); a deployment
        # that names no such queue leaves it out: the state machine's default, the long queue.
        queue_url = self.queue_urls.get(chunk_queue_for(msg.pool))
        if queue_url:
            execution_input["queue_url"] = queue_url
        # Another error than "already exists" propagates: the delivery fails and comes back; the next
        # one takes the run over.
        started = self.sfn.start_execution(
            self.state_machine_arn, name, json.dumps(execution_input, sort_keys=True, separators=(",", ":"))
        )
        if started:  # counted once per execution, as an executed attempt is (usage: runs_started)
            self.metrics.add(obs.CHUNKED_RUNS_STARTED)
            if self.meter is not None:  # the state transitions up to the plan task (usage)
                self.meter.record_billed(
                    "sfn_transitions", start_transitions(bool(queue_url)), tenant=run.tenant
                )
        if not started:
            described = self.sfn.describe_execution(self.execution_arn(name))
            if described["status"] != "RUNNING":
                return self._settle_closed(claim, name, described, snapshot, now)
        try:
            self.parents.hand_over(claim, self.owner, name, job.name, msg.timeout_seconds, now)
        except LeaseLostError:  # another worker took the run over meanwhile; it hands it over instead
            return Outcome("lease_lost", run.id, claim.attempt, detail={"execution": name})
        status = "chunked_started" if started else "chunked_running"
        return Outcome(status, run.id, claim.attempt, detail={"execution": name})

    def _settle_closed(
        self, claim: Claim, name: str, described: dict, snapshot: RunMessage, now: datetime
    ) -> Outcome:
        """The run's execution already ended but the run did not (its last write was lost): copy the
        execution's ending onto the run."""
        run = claim.run
        assert run is not None
        attempts = self.parents.attempts
        if described["status"] == "SUCCEEDED":
            result = (json.loads(described.get("output") or "{}") or {}).get("result") or {}
            attempts.succeed(
                claim, self.owner, now, output=result.get("output"), output_ref=result.get("output_ref")
            )
            self.metrics.add(obs.RUNS_SUCCEEDED)
            return Outcome("succeeded", run.id, claim.attempt, detail={"execution": name})
        why = f"{described.get('error', '')} {described.get('cause', '')}".strip()
        error = f"execution {name} ended {described['status']}: {why}"
        attempts.dead_letter(claim, self.owner, now, error.strip(), "chunked_execution", snapshot.to_json())
        self.metrics.add(obs.RUNS_FAILED)
        self.metrics.add(obs.RUNS_DEAD_LETTERED)
        return Outcome("dead_lettered", run.id, claim.attempt, detail={"execution": name, "error": error})


def _snapshot(msg: RunMessage, override: dict | None) -> RunMessage:
    """The run message as the execution input keeps it: independent of the delivery (attempt, due
    instant), so every start of the same run sends the same input."""
    snapshot = replace(msg, attempt=1, due_at=msg.scheduled_at)
    if override is not None:
        snapshot = replace(snapshot, payload=override)
    return snapshot
