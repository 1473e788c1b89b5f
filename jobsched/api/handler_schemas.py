"""Request and response models of the handler routes (``/handlers``, docs/api.md)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from jobsched.api.schemas import _In


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
        max_length=1000, description="what the check refused, as it listed it"
    )


class DeployCheckOut(BaseModel):
    forced: bool
    code_version: str
    problems: list[dict[str, Any]]
    recorded_at: str
    recorded_by: str


class DeployCheckList(BaseModel):
    items: list[DeployCheckOut] = Field(description="newest first (the last 100)")
