"""Bodies of the schedules-as-code routes (``PUT /jobs/by-name/{name}``, ``PUT /workflows/by-name/{name}``,
``GET /declared``). A declaration is a whole ``POST`` body without the name (the path gives it):
:class:`JobPut` and :class:`WorkflowPut` are :class:`JobIn` and :class:`WorkflowIn` less ``name``,
so a field added to jobs or workflows is declarable without a change here."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, field_validator
from pydantic.json_schema import SkipJsonSchema

from jobsched.api.schemas import JobIn, JobOut
from jobsched.api.workflow_schemas import WorkflowIn, WorkflowOut
from jobsched.services.declared import Outcome

_OUTCOME = (
    "created (201), updated (200: the changed fields followed PATCH's rules) or unchanged (200: "
    "nothing written, the version stays)"
)
_CHANGED = "the fields an update changed (nodes for a workflow's node list); empty when created or unchanged"


def _no_name(value: str | None) -> str | None:
    if value is not None:
        raise ValueError("the name is the path's: leave it out of the body")
    return value


class JobPut(JobIn):
    """``PUT /jobs/by-name/{name}``: the job's whole definition but its name, which the path gives (a
    field left out takes its default)."""

    name: SkipJsonSchema[str | None] = Field(default=None, exclude=True)  # type: ignore[assignment]

    _name_in_path = field_validator("name")(_no_name)


class WorkflowPut(WorkflowIn):
    """``PUT /workflows/by-name/{name}``: the workflow's whole definition but its name."""

    name: SkipJsonSchema[str | None] = Field(default=None, exclude=True)  # type: ignore[assignment]

    _name_in_path = field_validator("name")(_no_name)


class DeclaredJobOut(BaseModel):
    name: str
    outcome: Outcome = Field(description=_OUTCOME)
    changed_fields: list[str] = Field(description=_CHANGED)
    dry_run: bool = False
    job: JobOut | None = Field(description="the job as stored; null in a dry run that would create it")


class DeclaredWorkflowOut(BaseModel):
    name: str
    outcome: Outcome = Field(description=_OUTCOME)
    changed_fields: list[str] = Field(description=_CHANGED)
    dry_run: bool = False
    workflow: WorkflowOut | None = Field(
        description="the workflow as stored; null in a dry run that would create it"
    )


class DeclaredNameOut(BaseModel):
    name: str
    kind: Literal["job", "workflow"]
    id: str
    version: int


class DeclaredList(BaseModel):
    """Every name the tenant declared by ``PUT .../by-name`` (or ``jobsched apply``), by name."""

    items: list[DeclaredNameOut]
    next_cursor: None = Field(default=None, description="always null: every declared name is in the one page")
