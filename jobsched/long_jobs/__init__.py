"""Chunked (long) jobs: the Step Functions workflow that fans a run out into chunks.

:func:`jobsched.long_jobs.asl.chunked_job_definition` produces the state machine definition; the CDK
stack (``infra/long_jobs.py``) and the embedded mode (``jobsched/local``) both build the state machine
from it, so the cloud and the laptop run the same workflow.

The worker side: :mod:`.chunked` (``@chunked_job``, the user API), :mod:`.starter` (one execution per
run), :mod:`.runner` (the workflow's messages), :mod:`.steps` (heartbeats, task answers),
:mod:`.parent` (fenced writes of the run) and :mod:`.checkpoints` (per-chunk records). See
docs/semantics/chunked.md and docs/decisions/0003-chunked-jobs.md.
"""

from __future__ import annotations

from jobsched.long_jobs.asl import (
    DEFAULT_HEARTBEAT_SECONDS,
    DEFAULT_MAX_CONCURRENCY,
    MESSAGE_KINDS,
    chunked_job_definition,
)

__all__ = [
    "DEFAULT_HEARTBEAT_SECONDS",
    "DEFAULT_MAX_CONCURRENCY",
    "MESSAGE_KINDS",
    "chunked_job_definition",
]
