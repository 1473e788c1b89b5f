"""The registry of Python job handlers, keyed by name and version.

A handler is registered with ``@job("reports.nightly")`` (version 1) or
``@job("reports.nightly", version=2, payload=ReportV2, upgrades={1: v1_to_v2})`` and is called as
``handler(payload, ctx)`` where ``payload`` is the run's payload (a dict) and ``ctx`` a
:class:`~jobsched.targets.context.JobContext`. Its return value (JSON-serialisable) becomes the run's
output; it raises :class:`~jobsched.core.errors.RetryableError` or
:class:`~jobsched.core.errors.PermanentError` to classify a failure (any other exception counts as
retryable).

**Versions.** Several versions of one name may be registered at once (docs/handlers.md, decision
0048). A job names a handler and may pin a version (``{"handler": "report", "version": 1}``); an
unpinned job's run binds, when its first attempt starts, to the newest version registered in the code
that runs it, and keeps that version for its retries, a lease takeover and a dead-letter replay.

**Payload contracts.** A version may declare its payload's model — a pydantic model class or a JSON
Schema (a dict) — checked when a job is created or edited (a 422 naming the field) and again before
the handler is called; and ``upgrades``: ``{older_version: function}``, each turning a payload written
for that older version into one for this version. A job records the version its payload was checked
against (``payload_version``); a run of a newer version gets its payload upgraded before the call.

Registration is per process: the worker and the API import the modules that define handlers
(``jobsched.targets.demo`` and whatever ``JOBSCHED_HANDLER_MODULES`` names).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from jobsched.core.errors import ConflictError, PermanentError, ValidationError

if TYPE_CHECKING:
    from jobsched.targets.context import JobContext

Handler = Callable[[dict, "JobContext"], Any]
Upgrader = Callable[[dict], dict]

_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]{0,127}$")
MAX_VERSION = 1_000_000


@dataclass(frozen=True)
class PayloadContract:
    """What a handler version accepts as its payload: a JSON Schema, checked by a compiled validator.

    Built from a pydantic model (its ``model_json_schema()``, validated by the model itself so its
    own rules apply) or from a JSON Schema dict (validated with ``fastjsonschema``)."""

    schema: dict[str, Any]
    _check: Callable[[dict], dict] = field(repr=False, compare=False)

    @classmethod
    def of(cls, model: Any) -> PayloadContract:
        if isinstance(model, dict):
            return cls(schema=model, _check=_json_schema_check(model))
        validate = getattr(model, "model_validate", None)
        schema_of = getattr(model, "model_json_schema", None)
        if callable(validate) and callable(schema_of):
            return cls(schema=schema_of(), _check=_pydantic_check(model))
        raise TypeError(f"payload must be a pydantic model class or a JSON Schema dict, not {model!r}")

    def check(self, payload: dict, *, field_prefix: str = "payload") -> dict:
        """The payload as the handler will get it (a pydantic model's dump, defaults filled in), or
        :class:`ValidationError` whose ``field`` names the offending path (``payload.rows``)."""
        try:
            return self._check(payload)
        except _Invalid as invalid:
            path = ".".join([field_prefix, *invalid.path]) if invalid.path else field_prefix
            raise ValidationError(f"{path}: {invalid.message}", field=path) from None


class _Invalid(Exception):
    def __init__(self, path: list[str], message: str):
        super().__init__(message)
        self.path = path
        self.message = message


def _pydantic_check(model: Any) -> Callable[[dict], dict]:
    from pydantic import ValidationError as PydanticError

    def check(payload: dict) -> dict:
        try:
            return dict(model.model_validate(payload).model_dump(mode="json"))
        except PydanticError as exc:
            first = exc.errors()[0]
            raise _Invalid([str(p) for p in first.get("loc", ())], str(first.get("msg", exc))) from None

    return check


def _json_schema_check(schema: dict[str, Any]) -> Callable[[dict], dict]:
    import fastjsonschema

    try:
        validate = fastjsonschema.compile(schema)
    except fastjsonschema.JsonSchemaDefinitionException as exc:
        raise TypeError(f"payload schema is not a valid JSON Schema: {exc}") from exc

    def check(payload: dict) -> dict:
        try:
            validate(payload)
        except fastjsonschema.JsonSchemaValueException as exc:
            path = [str(p) for p in (exc.path or [])[1:]]  # path[0] is "data", the payload itself
            if exc.rule == "required" and isinstance(exc.rule_definition, list):
                missing = [
                    k for k in exc.rule_definition if not isinstance(exc.value, dict) or k not in exc.value
                ]
                if missing:
                    raise _Invalid([*path, str(missing[0])], "field required") from None
            raise _Invalid(path, exc.message.replace("data.", "", 1).replace("data ", "", 1)) from None
        return payload

    return check


@dataclass(frozen=True)
class Registered:
    """One registered version of a handler: its function, payload contract and upgraders."""

    name: str
    version: int
    fn: Handler
    contract: PayloadContract | None = None
    #: ``{older_version: function}``: each turns a payload for that version into one for this one.
    upgrades: Mapping[int, Upgrader] = field(default_factory=dict)
    description: str = ""

    @property
    def identity(self) -> str:
        return _identity(self.fn)

    @property
    def chunked(self) -> bool:
        """Whether this version is a chunked job (``@chunked_job``: its chunks run on the long or the
        container pool, never on ``lambda``)."""
        return getattr(self.fn, "chunked", False) is True

    def accepts_payload_of(self, version: int) -> bool:
        """True when a payload written for ``version`` can be given to this version (same, or upgradable)."""
        return version == self.version or version in self.upgrades

    def payload_for(
        self, payload: dict, payload_version: int | None, *, field_prefix: str = "payload"
    ) -> dict:
        """The payload this version is called with: upgraded from ``payload_version`` (``None``: this
        version's own) and checked against the contract.

        :class:`PermanentError` when no upgrader leads from ``payload_version`` (a payload newer than
        the handler, or a chain the code no longer has): retrying cannot help."""
        source = self.version if payload_version is None else payload_version
        if source != self.version:
            upgrade = self.upgrades.get(source)
            if upgrade is None:
                raise PermanentError(
                    f"handler {self.name!r} version {self.version} cannot take a payload written for version "
                    f"{source}: it declares upgrades from {sorted(self.upgrades) or 'no version'}"
                )
            upgraded = upgrade(dict(payload))
            if not isinstance(upgraded, dict):
                raise PermanentError(
                    f"the upgrader of {self.name!r} from version {source} to {self.version} returned "
                    f"{type(upgraded).__name__}, not an object"
                )
            payload = upgraded
        return self.contract.check(payload, field_prefix=field_prefix) if self.contract else payload

    def describe(self) -> dict[str, Any]:
        """The version as the API lists it (``GET /handlers``) and ``jobsched deploy-check`` compares it."""
        return {
            "name": self.name,
            "version": self.version,
            "payload_schema": self.contract.schema if self.contract else None,
            "upgrades_from": sorted(self.upgrades),
            "description": self.description,
            "function": self.identity,
        }


_handlers: dict[str, dict[int, Registered]] = {}
_lock = threading.Lock()


def job(
    name: str,
    *,
    version: int = 1,
    payload: Any = None,
    upgrades: Mapping[int, Upgrader] | None = None,
    description: str = "",
) -> Callable[[Handler], Handler]:
    """Register the decorated function as version ``version`` of the handler called ``name``.

    ``payload``: a pydantic model class or a JSON Schema dict the payload must satisfy. ``upgrades``:
    ``{older_version: function(payload) -> payload}`` for payloads written for older versions.

    Registering the same function twice (a module imported twice) is harmless; registering a
    different function under a taken name and version raises :class:`ConflictError`, because two
    handlers silently shadowing each other would run the wrong code.
    """
    if not _NAME.match(name):
        raise ValidationError(
            f"handler name {name!r} is invalid: use 1-128 letters, digits, '_', '.', '-'", field="handler"
        )
    if isinstance(version, bool) or not isinstance(version, int) or not 1 <= version <= MAX_VERSION:
        raise ValidationError(f"handler version must be an integer 1..{MAX_VERSION}", field="version")
    steps = dict(upgrades or {})
    bad = [k for k in steps if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k < version]
    if bad:
        raise ValidationError(
            f"upgrades of {name!r} version {version} must be keyed by older versions "
            f"(1..{version - 1}): {bad}",
            field="upgrades",
        )
    contract = PayloadContract.of(payload) if payload is not None else None

    def register(fn: Handler) -> Handler:
        entry = Registered(name, version, fn, contract, steps, description)
        with _lock:
            existing = _handlers.get(name, {}).get(version)
            if existing is not None and existing.identity != entry.identity:
                raise ConflictError(
                    f"handler {name!r} version {version} is already registered by {existing.identity}"
                )
            _handlers.setdefault(name, {})[version] = entry
        return fn

    return register


def lookup(name: str, version: int | None = None) -> Registered:
    """The registered ``version`` of ``name`` (``None``: the newest); :class:`ValidationError` if none."""
    versions = _handlers.get(name)
    if not versions:
        raise ValidationError(
            f"unknown handler {name!r}; registered handlers: {', '.join(sorted(_handlers)) or 'none'}",
            field="target.handler",
        )
    if version is None:
        return versions[max(versions)]
    found = versions.get(version)
    if found is None:
        raise ValidationError(
            f"handler {name!r} has no version {version}; registered versions: "
            f"{', '.join(str(v) for v in sorted(versions))}",
            field="target.version",
        )
    return found


def get_handler(name: str, version: int | None = None) -> Handler:
    """The function of ``name`` at ``version`` (``None``: the newest); :class:`ValidationError` if none."""
    return lookup(name, version).fn


def is_registered(name: str, version: int | None = None) -> bool:
    """True if a handler called ``name`` (at ``version``, when given) is registered in this process."""
    versions = _handlers.get(name, {})
    return bool(versions) if version is None else version in versions


def newest_version(name: str) -> int | None:
    """The highest registered version of ``name``; None when it is not registered."""
    versions = _handlers.get(name)
    return max(versions) if versions else None


def registered_names() -> list[str]:
    """The names of all registered handlers, sorted (for error messages and the console)."""
    return sorted(_handlers)


def catalogue() -> list[Registered]:
    """Every registered version, by name then version."""
    with _lock:
        return [entry for name in sorted(_handlers) for _, entry in sorted(_handlers[name].items())]


def unregister(name: str, version: int | None = None) -> None:
    """Remove a handler, or one version of it (tests register throwaway handlers and clean up)."""
    with _lock:
        if version is None:
            _handlers.pop(name, None)
            return
        versions = _handlers.get(name, {})
        versions.pop(version, None)
        if not versions:
            _handlers.pop(name, None)


def _identity(fn: Handler) -> str:
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"


class RegistryCatalog:
    """This process's registry as a :class:`~jobsched.core.handlers.HandlerCatalog`: what the API
    checks job targets and payloads against (the handlers the API function imports)."""

    def lookup(self, name: str, version: int | None = None) -> Registered:
        return lookup(name, version)

    def newest_version(self, name: str) -> int | None:
        return newest_version(name)

    def entries(self) -> list[Registered]:
        return catalogue()
