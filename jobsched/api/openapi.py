"""Make Powertools' generated OpenAPI document say what the API really answers.

Powertools documents every validation failure as its own ``HTTPValidationError`` body; this API
answers ``{"error", "message"}`` for every 4xx (see :mod:`jobsched.api.errors`). :func:`polish`
rewrites the document once, after generation: the error responses each operation can give, the
``ErrorOut`` schema, and ``security: []`` on the public routes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from jobsched.api.gate import ADMIN_PREFIX, PUBLIC_PATHS
from jobsched.api.schemas import ErrorOut

_ERROR_REF = {"$ref": "#/components/schemas/ErrorOut"}
_DESCRIPTIONS = {
    400: "Malformed request (JSON, encoding, cursor, header)",
    401: "No or invalid credentials, or a principal mapped to no tenant",
    403: "Not an administrator",
    404: "No such object for this tenant",
    409: "Conflicts with the current state or a limit",
    412: "If-Match names a stale version",
    413: "Body or payload over its size limit",
    422: "A field is invalid; the message names it",
    428: "If-Match is missing",
}
_METHODS_WITH_BODY = {"post", "put", "patch"}
#: Routes that answer 404 for a query parameter: ``/runs?job_id=`` names a job id that cannot exist.
_NOT_FOUND_BY_QUERY = {("/runs", "get")}
#: Routes outside /admin that answer 403: ``/usage?tenant=`` naming another tenant and
#: ``/handlers?scope=all``, for a non-admin; and the handler routes only administrators call.
_FORBIDDEN_BY_QUERY = {("/usage", "get"), ("/handlers", "get")}
#: The create-or-update routes (schedules as code): 201 or 200, and 409 for a name held by the other
#: kind, several jobs to adopt, or the tenant's job limit.
_BY_NAME_PUTS = {("/jobs/by-name/{name}", "put"), ("/workflows/by-name/{name}", "put")}
_ADMIN_ROUTES = {
    ("/handlers/{name}/versions/{version}/drain", "post"),
    ("/handlers/{name}/versions/{version}/drain", "delete"),
    ("/handlers/deploy-checks", "post"),
    ("/handlers/deploy-checks", "get"),
}


def _error_codes(path: str, method: str, operation: dict[str, Any]) -> list[int]:
    if path in PUBLIC_PATHS:
        return [422] if operation.get("parameters") else []
    codes = [400, 401, 422]
    if path.startswith(ADMIN_PREFIX) or (path, method) in _FORBIDDEN_BY_QUERY | _ADMIN_ROUTES:
        codes.append(403)
    if "{" in path or method == "delete" or (path, method) in _NOT_FOUND_BY_QUERY:
        codes.append(404)
    if method in {"post", "patch", "delete"} or (path, method) in _BY_NAME_PUTS:
        codes.append(409)
    headers = {p.get("name", "").lower() for p in operation.get("parameters", []) if p.get("in") == "header"}
    if "if-match" in headers:
        codes += [412, 428]
    if method in _METHODS_WITH_BODY:
        codes.append(413)
    return sorted(codes)


def polish(document: dict[str, Any]) -> dict[str, Any]:
    """Return the document with this API's error responses and public routes marked."""
    for path, item in document.get("paths", {}).items():
        for method, operation in item.items():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            responses = operation["responses"]
            responses.pop("422", None)
            responses.pop(422, None)
            if "204" in responses or 204 in responses:
                responses.pop("200", None)  # a no-content route has no 200 body to describe
                (responses.get("204") or responses[204]).pop("content", None)
            created = responses.get("201") or responses.get(201)
            if created is not None and "200" in responses:
                # A creating route answers 201 with the body Powertools documented under 200; a
                # create-or-update route (PUT by name) answers both.
                ok = responses["200"] if (path, method) in _BY_NAME_PUTS else responses.pop("200")
                created.setdefault("content", ok.get("content", {}))
            for code in _error_codes(path, method, operation):
                described = _DESCRIPTIONS[code]
                if code == 404 and (path, method) in _NOT_FOUND_BY_QUERY:
                    described = "job_id is not a possible job id (a well-formed unknown one lists nothing)"
                if code == 403 and (path, method) == ("/usage", "get"):
                    described = "tenant names another tenant, and the caller is not an administrator"
                if code == 403 and (path, method) == ("/handlers", "get"):
                    described = "scope=all, and the caller is not an administrator"
                responses[str(code)] = {
                    "description": described,
                    "content": {"application/json": {"schema": _ERROR_REF}},
                }
            if path in PUBLIC_PATHS:
                operation["security"] = []
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    schemas.pop("HTTPValidationError", None)
    schemas.pop("ValidationError", None)
    schemas.pop("ResponseValidationError", None)
    schemas["ErrorOut"] = ErrorOut.model_json_schema()
    return document


_COMPONENT_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def payload_component(name: str, version: int) -> str:
    """The component name of a handler version's payload schema: ``Payload_<name>_v<version>``."""
    return f"Payload_{_COMPONENT_UNSAFE.sub('_', name)}_v{version}"


def with_payload_schemas(document: dict[str, Any], versions: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The document with each registered handler version's payload schema as a component
    (``Payload_<name>_v<version>``; its ``$defs`` become components of their own) and the job
    schemas' ``target`` and ``payload`` saying which schema a payload is checked against.

    ``versions``: :meth:`jobsched.targets.registry.Registered.describe` of every registered version."""
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    listed = []
    for described in versions:
        schema = described.get("payload_schema")
        name, version = str(described["name"]), int(described["version"])
        if not isinstance(schema, Mapping):
            listed.append(f"{name} v{version}: any JSON object")
            continue
        component = payload_component(name, version)
        body = dict(schema)
        defs = body.pop("$defs", None) or body.pop("definitions", None) or {}
        renamed = {f"#/$defs/{d}": f"#/components/schemas/{component}_{d}" for d in defs}
        renamed |= {f"#/definitions/{d}": f"#/components/schemas/{component}_{d}" for d in defs}
        for d, sub in defs.items():
            schemas[f"{component}_{d}"] = _with_refs(sub, renamed)
        schemas[component] = {**_with_refs(body, renamed), "title": component}
        listed.append(f"{name} v{version}: #/components/schemas/{component}")
    if not listed:
        return document
    note = (
        "A handler target's payload is checked against the payload schema of the version the job will run "
        "(the pinned version, else the newest registered one); a payload it refuses is a 422 naming the "
        "field (payload.<field>). Registered versions: " + "; ".join(listed) + "."
    )
    for model in ("JobIn", "JobPut", "JobPatch"):
        props = schemas.get(model, {}).get("properties", {})
        if "payload" in props:
            props["payload"]["description"] = note
    target = schemas.get("TargetIn")
    if target is not None:
        target["description"] = f"{target.get('description', '')}. {note}".lstrip(". ")
    return document


def _with_refs(node: Any, renamed: Mapping[str, str]) -> Any:
    if isinstance(node, Mapping):
        return {
            k: renamed.get(v, v) if k == "$ref" and isinstance(v, str) else _with_refs(v, renamed)
            for k, v in node.items()
        }
    if isinstance(node, list):
        return [_with_refs(v, renamed) for v in node]
    return node
