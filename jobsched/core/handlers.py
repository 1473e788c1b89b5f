"""Handler versions as the API sees them: the catalogue it checks targets and payloads against, and the
count of what refers to each version (``GET /handlers``). Pure: the catalogue is a Protocol
(:class:`jobsched.targets.registry.RegistryCatalog` implements it over the registry), the references
come from the stores (:mod:`jobsched.aws.handler_usage`), and nothing here reads a clock.

What counts for a version (decision 0048: an unpinned run binds to the newest version when its first
attempt starts; decision 0049: how the references are read):

* a **job** counts for the version it pins, else for the newest registered version of its handler
  (a workflow job counts once for each node's handler);
* a **run** (queued, running, retrying, dead-lettered) counts for the version it is bound to (or its
  job pins), else, unbound, for the newest version of its handler: that is the one it will bind to;
* a reference to a handler or a version this code does not register is listed under ``missing``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Protocol

from jobsched.core.errors import ConflictError, ValidationError

#: The kinds of reference, in the order the counts are listed.
REFERENCE_KINDS = ("jobs", "queued", "running", "retrying", "dead_lettered")
#: At most this many job ids and run ids are given as examples of a version's references.
MAX_EXAMPLES = 10


class HandlerVersion(Protocol):
    """One registered version of a handler (:class:`jobsched.targets.registry.Registered`)."""

    @property
    def name(self) -> str: ...

    @property
    def version(self) -> int: ...

    def payload_for(
        self, payload: dict[str, Any], payload_version: int | None, *, field_prefix: str = "payload"
    ) -> dict[str, Any]: ...

    def describe(self) -> dict[str, Any]: ...

    @property
    def chunked(self) -> bool:
        """Whether the version is a chunked job (its runs' pool is ``long`` or ``container``)."""
        ...


class HandlerCatalog(Protocol):
    """The handler versions the code registers: what job targets and payloads are checked against."""

    def lookup(self, name: str, version: int | None = None) -> HandlerVersion:
        """The ``version`` of ``name`` (None: the newest); :class:`ValidationError` when not registered."""
        ...

    def newest_version(self, name: str) -> int | None: ...

    def entries(self) -> Sequence[HandlerVersion]:
        """Every registered version, by name then version."""
        ...


class DrainingVersionError(ConflictError):
    """Raised when a job create or edit pins a handler version marked draining (409), or when the
    newest registered version of a handler is to be marked draining (unpinned runs bind to it)."""

    code = "handler_version_draining"


def handler_targets(target: Any) -> list[tuple[str, int | None, str]]:
    """``(handler, pinned version or None, where)`` for each handler a job target names: one for a
    handler target, one per handler node of a workflow, none for an HTTP target. ``where`` is the
    field prefix of the payload checked for it (``payload``, ``nodes[0].payload``)."""
    if not isinstance(target, Mapping):
        return []
    if isinstance(target.get("handler"), str):
        version = target.get("version")
        pinned = (
            int(version) if isinstance(version, int | Decimal) and not isinstance(version, bool) else None
        )
        return [(target["handler"], pinned, "payload")]
    workflow = target.get("workflow")
    nodes = workflow.get("nodes", []) if isinstance(workflow, Mapping) else []
    out: list[tuple[str, int | None, str]] = []
    for i, node in enumerate(nodes if isinstance(nodes, list) else []):
        if isinstance(node, Mapping):
            out += [
                (name, version, f"nodes[{i}].payload")
                for name, version, _ in handler_targets(node.get("target"))
            ]
    return out


def check_handler_version(name: str, version: int | None, catalog: HandlerCatalog) -> HandlerVersion:
    """The version a target naming ``name`` (pinned to ``version``, or None) will run; a 422 naming
    ``target.version`` when the pinned version is not registered."""
    try:
        return catalog.lookup(name, version)
    except ValidationError as exc:
        field = exc.field or "target"
        raise ValidationError(f"{field}: {exc.message}", field=field) from None


def checked_payload_version(target: Any, payload: Any, catalog: HandlerCatalog) -> int | None:
    """Check ``payload`` against the contract of the version ``target`` will run (pinned, else the
    newest) and return that version: the job's ``payload_version``. None for an HTTP or a workflow
    target (a workflow's node payloads are checked by :func:`check_node_payloads`)."""
    if not isinstance(target, Mapping) or not isinstance(target.get("handler"), str):
        return None
    ((name, version, where),) = handler_targets(target)
    entry = check_handler_version(name, version, catalog)
    entry.payload_for(payload if isinstance(payload, dict) else {}, None, field_prefix=where)
    return entry.version


def check_node_payloads(target: Any, catalog: HandlerCatalog) -> None:
    """Each handler node of a workflow target: its pinned version registered, its payload valid for
    the version it will run (a 422 naming ``nodes[<i>].payload.<field>``)."""
    workflow = target.get("workflow") if isinstance(target, Mapping) else None
    if not isinstance(workflow, Mapping):
        return
    nodes = workflow.get("nodes", [])
    for i, node in enumerate(nodes if isinstance(nodes, list) else []):
        if not isinstance(node, Mapping):
            continue
        for name, version, where in handler_targets(node.get("target")):
            entry = check_handler_version(name, version, catalog)
            payload = node.get("payload", {})
            entry.payload_for(
                payload if isinstance(payload, dict) else {}, None, field_prefix=f"nodes[{i}].{where}"
            )


def pinned_versions(target: Any) -> list[tuple[str, int]]:
    """``(handler, version)`` of every version a job target pins (its own, or its nodes')."""
    return [(name, version) for name, version, _ in handler_targets(target) if version is not None]


@dataclass(frozen=True)
class Reference:
    """Something that will execute (or may be replayed under) a handler: a job, or a run in flight or
    dead-lettered. ``version``: the version it is pinned or bound to (None: unbound, it will run the
    newest); ``payload_version``: for a job, the version its payload was checked against (None: a job
    written before handlers had versions, read as 1)."""

    kind: str  # one of REFERENCE_KINDS
    id: str
    handler: str
    version: int | None = None
    payload_version: int | None = None
    #: A workflow node's handler (its job's ``payload_version`` is not the node's).
    node: bool = False


def _counts() -> dict[str, Any]:
    return {**{kind: 0 for kind in REFERENCE_KINDS}, "examples": {"jobs": [], "runs": []}}


def _count(counts: dict[str, Any], ref: Reference) -> None:
    counts[ref.kind] += 1
    examples = counts["examples"]["jobs" if ref.kind == "jobs" else "runs"]
    if len(examples) < MAX_EXAMPLES and ref.id not in examples:
        examples.append(ref.id)


def overview(
    entries: Iterable[HandlerVersion],
    references: Iterable[Reference],
    draining: Iterable[tuple[str, int]],
    *,
    code_version: str | None,
    scope: str,
) -> dict[str, Any]:
    """The body of ``GET /handlers`` (docs/api.md): each registered version with its status and the
    counts of what refers to it, the payload versions of unpinned jobs, and the references to
    handlers or versions this code does not register."""
    described = [entry.describe() for entry in entries]
    newest: dict[str, int] = {}
    for d in described:
        newest[d["name"]] = max(newest.get(d["name"], 0), d["version"])
    counts = {(d["name"], d["version"]): _counts() for d in described}
    missing: dict[tuple[str, int | None], dict[str, Any]] = {}
    unpinned: dict[str, dict[str, int]] = {}
    for ref in references:
        version = ref.version if ref.version is not None else newest.get(ref.handler)
        key = (ref.handler, version)
        if key in counts:
            _count(counts[key], ref)
        else:
            _count(missing.setdefault((ref.handler, ref.version), _counts()), ref)
        if ref.kind == "jobs" and ref.version is None and not ref.node:
            by_version = unpinned.setdefault(ref.handler, {})
            label = str(ref.payload_version or 1)
            by_version[label] = by_version.get(label, 0) + 1
    marked = set(draining)
    handlers = []
    for d in described:
        key = (d["name"], d["version"])
        c = counts[key]
        status = "active"
        if key in marked:
            status = "drained" if all(c[kind] == 0 for kind in REFERENCE_KINDS) else "draining"
        handlers.append(
            {
                "name": d["name"],
                "version": d["version"],
                "newest": d["version"] == newest[d["name"]],
                "status": status,
                "description": d.get("description", ""),
                "payload_schema": d.get("payload_schema"),
                "upgrades_from": list(d.get("upgrades_from", [])),
                **c,
            }
        )
    return {
        "code_version": code_version,
        "scope": scope,
        "handlers": handlers,
        "unpinned_payload_versions": {name: dict(sorted(v.items())) for name, v in sorted(unpinned.items())},
        "missing": [
            {"name": name, "version": version, **c}
            for (name, version), c in sorted(missing.items(), key=lambda kv: (kv[0][0], kv[0][1] or 0))
        ],
    }
