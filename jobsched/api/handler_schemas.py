"""Request and response models of the handler routes (``/handlers``, docs/api.md)."""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

from jobsched.api.schemas import _In
from jobsched.api.storable import check_storable
from jobsched.ports.handlers import MAX_DEPLOY_CHECK_BYTES

#: Problems one forced deploy-check may record (one per handler version or name it refused).
MAX_DEPLOY_CHECK_PROBLEMS = 100


class ExamplesOut(BaseModel):
    jobs: list[str] = Field(description="up to 10 ids of the jobs counted")
    runs: list[str] = Field(description="up to 10 ids of the runs counted")


class ReferenceCountsOut(BaseModel):
    jobs: int = Field(description="jobs that will run it: pinned to it, or unpinned when it is the newest")
    queued: int = Field(description="queued runs bound or pinned to it (unbound ones: of the newest version)")
    running: int
    retrying: int
    dead_lettered: int
    examples: ExamplesOut


class HandlerVersionOut(ReferenceCountsOut):
    name: str
    version: int
    newest: bool = Field(description="the newest registered version: unpinned runs bind to it")
    status: Literal["active", "draining", "drained"] = Field(
        description="draining: marked, no new job may pin it; drained: draining and nothing refers to it"
    )
    description: str
    payload_schema: dict[str, Any] | None = Field(description="the JSON Schema of its payload (null: none)")
    upgrades_from: list[int] = Field(description="older payload versions it upgrades")


class MissingOut(ReferenceCountsOut):
    name: str
    version: int | None = Field(description="the version referred to (null: unbound, the newest)")


class HandlersOut(BaseModel):
    """``GET /handlers``."""

    code_version: str | None = Field(description="the deployment's code version (JOBSCHED_CODE_VERSION)")
    scope: Literal["tenant", "all"]
    handlers: list[HandlerVersionOut]
    unpinned_payload_versions: dict[str, dict[str, int]] = Field(
        description="per handler, how many unpinned jobs have their payload checked against each version"
    )
    missing: list[MissingOut] = Field(description="references to handlers or versions this code lacks")


class DeployCheckIn(_In):
    """``POST /handlers/deploy-checks``: a deploy that went on despite the pre-deploy check."""

    forced: Literal[True]
    code_version: str = Field(min_length=1, max_length=200, description="the code version deployed")
    problems: list[dict[str, Any]] = Field(
        max_length=MAX_DEPLOY_CHECK_PROBLEMS,
        description=f"what the check refused, as listed (at most {MAX_DEPLOY_CHECK_BYTES} bytes of JSON)",
    )

    @field_validator("problems")
    @classmethod
    def _storable_problems(cls, value: list[dict[str, Any]]) -> list[dict[str, Any]]:
        check_storable(value, "problems")
        size = len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())
        if size > MAX_DEPLOY_CHECK_BYTES:
            raise ValueError(f"problems are {size} bytes of JSON; at most {MAX_DEPLOY_CHECK_BYTES}")
        return value


class DeployCheckOut(BaseModel):
    forced: bool
    code_version: str
    problems: list[dict[str, Any]]
    recorded_at: str
    recorded_by: str


class DeployCheckList(BaseModel):
    items: list[DeployCheckOut] = Field(description="newest first (the last 100)")
