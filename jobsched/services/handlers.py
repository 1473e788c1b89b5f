"""Handler versions for operators: what refers to each (``GET /handlers``), draining marks, and the
record of forced deploy-checks (issue 29, decisions 0048 and 0049)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from jobsched.core.errors import NotFoundError, ValidationError
from jobsched.core.handlers import DrainingVersionError, HandlerCatalog, overview
from jobsched.core.instants import to_iso
from jobsched.core.models import require_aware
from jobsched.ports.handlers import DEPLOY_CHECK_FIELDS, HandlerMarks, HandlerReferences

#: Problems one deploy-check record may list.
MAX_PROBLEMS = 1000


class HandlerService:
    """The registered versions (``catalog``), the marks kept about them and what refers to them."""

    def __init__(
        self,
        catalog: HandlerCatalog,
        marks: HandlerMarks,
        references: HandlerReferences,
        *,
        code_version: str | None = None,
    ):
        self.catalog = catalog
        self.marks = marks
        self.references = references
        self.code_version = code_version

    def overview(self, tenant: str | None) -> dict[str, Any]:
        """Every registered version with its status and what refers to it: ``tenant``'s jobs and runs,
        or (None) every tenant's."""
        return overview(
            self.catalog.entries(),
            self.references.references(tenant),
            self.marks.draining(),
            code_version=self.code_version,
            scope="tenant" if tenant is not None else "all",
        )

    def drain(self, name: str, version: int, *, now: datetime, by: str) -> dict[str, Any]:
        """Mark ``version`` of ``name`` draining: no new job may pin it. 404 when it is not
        registered, 409 when it is the newest (unpinned runs bind to it). The version as listed."""
        require_aware(now, "now")
        self._registered(name, version)
        if self.catalog.newest_version(name) == version:
            raise DrainingVersionError(
                f"handler {name!r} version {version} is the newest registered version: unpinned runs bind "
                "to it, so it cannot drain; register a newer version first"
            )
        self.marks.mark_draining(name, version, now=now, by=by)
        return self._listed(name, version)

    def undrain(self, name: str, version: int) -> dict[str, Any]:
        """Remove the draining mark of ``version`` of ``name`` (404 when it is not registered)."""
        self._registered(name, version)
        self.marks.unmark_draining(name, version)
        return self._listed(name, version)

    def record_deploy_check(self, body: dict[str, Any], *, now: datetime, by: str) -> dict[str, Any]:
        """Keep the record of a deploy that went on despite the pre-deploy check's problems."""
        require_aware(now, "now")
        if body.get("forced") is not True:
            raise ValidationError("only a forced deploy-check is recorded: send forced: true", field="forced")
        code_version = body.get("code_version")
        if not isinstance(code_version, str) or not code_version.strip() or len(code_version) > 200:
            raise ValidationError("code_version must be a string of 1-200 characters", field="code_version")
        problems = body.get("problems")
        if not isinstance(problems, list) or len(problems) > MAX_PROBLEMS:
            raise ValidationError(
                f"problems must be a list of at most {MAX_PROBLEMS} entries", field="problems"
            )
        record = {k: body[k] for k in DEPLOY_CHECK_FIELDS}
        return self.marks.record_deploy_check({**record, "recorded_at": to_iso(now), "recorded_by": by})

    def deploy_checks(self) -> list[dict[str, Any]]:
        """The forced deploy-checks recorded, newest first."""
        return self.marks.deploy_checks()

    def _registered(self, name: str, version: int) -> None:
        try:
            self.catalog.lookup(name, version)
        except ValidationError as exc:
            raise NotFoundError(exc.message) from None

    def _listed(self, name: str, version: int) -> dict[str, Any]:
        listed = self.overview(None)["handlers"]
        return next(h for h in listed if (h["name"], h["version"]) == (name, version))
