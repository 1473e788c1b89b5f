"""Make the OpenAPI document say exactly what the API accepts, and how its operations connect.

Powertools generates the document from the pydantic models, which check shape; the services check
meaning (a schedule, a time zone, a registered handler, a storable payload, an ``If-Match`` version).
:func:`tighten` writes those rules into the document wherever JSON Schema can say them, so a client
(or a fuzzer) that follows the document is not refused:

- headers: ``If-Match`` is required where the route answers 428 without it, and both it and
  ``Idempotency-Key`` carry the pattern the API checks; cursors are base64url;
- request bodies: ``null`` is left out where the API refuses it (``PATCH /jobs/{id}``), strings the
  API strips must hold a non-space character, ``target`` is exactly one of ``handler``/``http``, a
  handler is one of the deployment's registered handlers, a time zone one of the IANA zones, a
  payload value one DynamoDB can store, an SNS topic one the deployment's allow-list matches;
- rules JSON Schema has no words for get a named ``format`` and a description: ``jobsched-schedule``
  (the grammar of docs/semantics/time.md, with at least one occurrence to come) and
  ``jobsched-http-url`` (an absolute http(s) URL without credentials whose host is not, literally, a
  loopback or private address); cross-field rules (``from`` <= ``to``, ``base_seconds`` <=
  ``max_seconds``, a backfill of at most 1000 occurrences) are in the descriptions;
- OpenAPI links from each object's creation to the routes that take its id, so a client can walk
  job -> runs -> run -> dead letter, and workflow -> workflow runs;
- the limit objects' rules on which fields go together (``anyOf``), and a workflow's graph rules in
  words (``depends_on``).

Decision 0025 lists what the fuzzer found and the deviations accepted.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any
from zoneinfo import available_timezones

from jobsched.api.storable import INTEGER_LIMIT, MAX_NESTING
from jobsched.core.notify import TOPIC_ARN

SCHEDULE_FORMAT = "jobsched-schedule"
HTTP_URL_FORMAT = "jobsched-http-url"
IF_MATCH_PATTERN = r'^(W/)?"?[0-9]{1,18}"?$'
IDEMPOTENCY_KEY_PATTERN = r"^[!-~]{1,128}$"
#: Every cursor this API issues: empty (the first page), or base64url of a JSON object whose first key
#: is the checksum, ``{"c":"`` = ``eyJjIjoi`` (:func:`jobsched.api.pagination.encode_cursor`). What no
#: pattern can say, the checksum, is in the parameter's description: a well-shaped cursor the API did
#: not issue answers 400.
CURSOR_PATTERN = r"^(eyJjIjoi[A-Za-z0-9_-]{1,2040})?$"
JOB_ID_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"
#: Contains a character that is not white space (the request models strip strings before checking).
NON_BLANK_PATTERN = r"\S"
_REF = "#/components/schemas/"
#: Integral payload numbers are of magnitude below 10**38, stated as an exclusive bound written as the
#: double ``1e+38``: its decimal spelling is exactly 10**38, so a reader that takes bounds as doubles
#: (Powertools' document model does, and so does schemathesis) and one that takes them as decimals
#: read the same number. An inclusive ``maximum`` of 10**38 - 1 was written ``1e+38`` (refused), and
#: the largest 38-digit double, 99999999999999978859343891977453174784, ``9.999999999999998e+37``,
#: whose decimal reading is above it (schemathesis sent 99999999999999979999999999999999999999).
_INTEGER_BOUND = float(INTEGER_LIMIT)
#: A day of GET /usage (``from``, ``to``): ``date.fromisoformat`` alone also takes 20261201 and
#: 2026-W49-2, which the document's ``format: date`` does not.
DAY_PATTERN = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"

#: The request-body models (pydantic strips their strings before the length checks).
REQUEST_MODELS = (
    "JobIn",
    "JobPut",
    "JobPatch",
    "TargetIn",
    "HttpTargetIn",
    "NotifyIn",
    "RetryIn",
    "PauseIn",
    "ResumeIn",
    "BackfillIn",
    "TriggerIn",
    "ReplayIn",
    "RetryRunIn",
    "ReplayFilterIn",
    "PrincipalIn",
    "ConcurrencyIn",
    "RateLimitIn",
    "NodeIn",
    "WorkflowIn",
    "WorkflowPut",
    "WorkflowPatch",
    "WorkflowTriggerIn",
    "TenantLimitIn",
)
#: Request bodies whose fields may be left out but not sent as ``null`` (the API refuses ``null``).
NO_NULL_MODELS = ("JobPatch", "WorkflowPatch")


@dataclass(frozen=True)
class DeploymentFacts:
    """What the document cannot know from the models: this deployment's registered handlers and its
    SNS topic allow-list (``*`` any run of characters, ``?`` one, as ``notify_topic_arns``)."""

    handlers: tuple[str, ...] = ()
    topic_patterns: tuple[str, ...] = field(default=())
    #: Every registered handler version as :meth:`jobsched.targets.registry.Registered.describe` gives it.
    handler_versions: tuple[dict[str, Any], ...] = ()


def topic_regex(patterns: Iterable[str]) -> str | None:
    """One anchored regex for the allow-list patterns; ``None`` when the list is empty."""
    parts = [
        "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in p) for p in patterns if p
    ]
    return f"^(?:{'|'.join(parts)})$" if parts else None


def storable_value_schema() -> dict[str, Any]:
    """A JSON value a DynamoDB item can hold (:mod:`jobsched.api.storable`), nesting apart."""
    ref = {"$ref": f"{_REF}StorableValue"}
    return {
        "description": "a JSON value DynamoDB can store: an integral number has at most 38 digits "
        "(a magnitude below 1e38), a "
        f"fraction a magnitude of at least 1e-130 (send others as strings); at most {MAX_NESTING} "
        "levels of nesting",
        "anyOf": [
            {"type": "null"},
            {"type": "boolean"},
            {"type": "string"},
            {"type": "integer", "exclusiveMinimum": -_INTEGER_BOUND, "exclusiveMaximum": _INTEGER_BOUND},
            # a double with a fraction is below 2**53 in magnitude
            {"type": "number", "not": {"type": "integer"}, "minimum": 1e-130, "maximum": 2.0**53},
            {"type": "number", "not": {"type": "integer"}, "minimum": -(2.0**53), "maximum": -1e-130},
            {"type": "array", "items": ref},
            {"type": "object", "additionalProperties": ref, "propertyNames": {"minLength": 1}},
        ],
    }


def _without_null(schema: dict[str, Any]) -> dict[str, Any]:
    variants = schema.get("anyOf")
    if not isinstance(variants, list):
        return schema
    kept = [v for v in variants if v != {"type": "null"}]
    if len(kept) == len(variants):
        return schema
    rest = {k: v for k, v in schema.items() if k != "anyOf"}
    return {**rest, **kept[0]} if len(kept) == 1 else {**rest, "anyOf": kept}


def _string_variants(schema: dict[str, Any]) -> list[dict[str, Any]]:
    """The string schemas of a property (itself, or its anyOf members)."""
    candidates = schema.get("anyOf", [schema])
    return [c for c in candidates if isinstance(c, dict) and c.get("type") == "string"]


def _set_string(schema: dict[str, Any], **keywords: Any) -> None:
    for variant in _string_variants(schema):
        variant.update(keywords)


def _tighten_bodies(schemas: dict[str, Any], facts: DeploymentFacts) -> None:
    schemas["StorableValue"] = storable_value_schema()
    payload = {
        "type": "object",
        "additionalProperties": {"$ref": f"{_REF}StorableValue"},
        "propertyNames": {"minLength": 1},
        "description": "a JSON object; every value one DynamoDB can store (StorableValue)",
    }
    for name in REQUEST_MODELS:
        model = schemas.get(name)
        if model is None:
            continue
        for prop, schema in model.get("properties", {}).items():
            for variant in _string_variants(schema):
                if variant.get("minLength", 0) >= 1 and not {"pattern", "enum", "format"} & set(variant):
                    variant["pattern"] = NON_BLANK_PATTERN
            names = schema.get("propertyNames")
            if prop != "payload" and isinstance(names, dict) and names.get("minLength", 0) >= 1:
                # keys the model strips (an http target's header names): a key of white space only
                # (" ", "\u0085") is empty once stripped and refused, so the document says so
                names.setdefault("pattern", NON_BLANK_PATTERN)
            if prop == "payload":
                variants = schema.get("anyOf")
                if variants:
                    schema["anyOf"] = [payload if v.get("type") == "object" else v for v in variants]
                else:
                    model["properties"][prop] = {**payload, "title": schema.get("title", "Payload")}
        if name in NO_NULL_MODELS:
            model["properties"] = {k: _without_null(v) for k, v in model["properties"].items()}

    zones = sorted(available_timezones() | {"UTC"})
    schemas["TimeZone"] = {"type": "string", "enum": zones, "description": "an IANA time zone name"}
    for name in ("JobIn", "JobPut", "JobPatch", "WorkflowIn", "WorkflowPut", "WorkflowPatch"):
        if name not in schemas:
            continue
        props = schemas[name]["properties"]
        default = props["timezone"].get("default")
        props["timezone"] = {"$ref": f"{_REF}TimeZone", **({"default": default} if default else {})}
        _set_string(
            props["schedule"],
            format=SCHEDULE_FORMAT,
            description="cron (5 fields, or 6 with leading seconds), @macro, cron(m h dom mon dow year), "
            "rate(N unit) or at(YYYY-MM-DDTHH:MM:SS) (docs/semantics/time.md), with at least one "
            "occurrence after now in its time zone",
        )
        retry = props.get("retry")
        if retry is not None:
            retry["description"] = "retry policy; base_seconds must be <= max_seconds"

    for prop in ("base_seconds", "max_seconds"):
        seconds = schemas["RetryIn"]["properties"][prop]
        low, high = seconds.pop("minimum", 0), seconds.pop("maximum", 86400)
        seconds.pop("type", None)
        seconds["anyOf"] = [
            {"type": "number", "const": 0},
            {"type": "number", "minimum": max(low, 1e-130), "maximum": high},
        ]
    target = schemas["TargetIn"]
    handler = {"type": "string", "enum": list(facts.handlers), "description": "a registered handler"}
    http = {"$ref": f"{_REF}HttpTargetIn"}
    version = {
        "type": "integer",
        "minimum": 1,
        "maximum": 1_000_000,
        "description": "the handler version to pin (absent: the newest when the run's first attempt starts)",
    }
    target["properties"] = {
        "handler": {"anyOf": [handler, {"type": "null"}]},
        "version": {"anyOf": [version, {"type": "null"}]},
        "http": {"anyOf": [http, {"type": "null"}]},
    }
    # One branch per handler, so a pinned version is one that handler registers (a version of another
    # handler, or none at all, is a 422 the document says); a handler with no versions listed is
    # version 1, as every handler registered without one.
    registered: dict[str, list[int]] = {name: [] for name in facts.handlers}
    for described in facts.handler_versions:
        registered.setdefault(str(described["name"]), []).append(int(described["version"]))
    per_handler = [
        {
            "properties": {
                "handler": {"type": "string", "const": name},
                "version": {
                    "anyOf": [{"type": "integer", "enum": sorted(versions) or [1]}, {"type": "null"}]
                },
                "http": {"type": "null"},
            },
            "required": ["handler"],
        }
        for name, versions in sorted(registered.items())
    ]
    target["oneOf"] = [
        *per_handler,
        {
            "properties": {"http": http, "handler": {"type": "null"}, "version": {"type": "null"}},
            "required": ["http"],
        },
    ]
    target["description"] = (
        'exactly one of {"handler": "<name>"} (with "version": <n> to pin one) or {"http": {...}}'
    )
    schemas["HttpTargetIn"]["properties"]["body"] = {
        "description": "request body: a JSON object or array of StorableValue, or text",
        "anyOf": [
            payload,
            {"type": "array", "items": {"$ref": f"{_REF}StorableValue"}},
            {"type": "string"},
            {"type": "null"},
        ],
    }
    checks = schemas.get("DeployCheckIn")
    if checks is not None:  # each problem as stored: an object of values DynamoDB can hold
        checks["properties"]["problems"]["items"] = payload
    schemas["HttpTargetIn"]["properties"]["url"].update(
        {"pattern": "^https?://", "format": HTTP_URL_FORMAT, "description": "http:// or https:// URL"}
    )

    notify = schemas["NotifyIn"]["properties"]
    regex = topic_regex(facts.topic_patterns)
    if regex is None:
        notify["sns_topic_arn"] = {
            "not": {},
            "description": "not accepted: this deployment's notify_topic_arns allow-list is empty",
        }
    else:
        arn = {"type": "string", "allOf": [{"pattern": TOPIC_ARN.pattern}, {"pattern": regex}]}
        notify["sns_topic_arn"] = {
            "anyOf": [arn, {"type": "null"}],
            "description": "an SNS topic ARN that the deployment's notify_topic_arns allow-list matches",
        }
    _set_string(
        notify["webhook"],
        minLength=1,
        format=HTTP_URL_FORMAT,
        description="absolute http(s) URL without credentials; its host is not, literally, a loopback or "
        "private address (SSRF guard)",
    )
    backfill = schemas["BackfillIn"]
    backfill["description"] = "from <= to, and at most 1000 occurrences of the job's schedule in [from, to]"
    _tighten_limits(schemas)
    _tighten_nodes(schemas)


def _given(prop: str, kind: str) -> dict[str, Any]:
    return {"properties": {prop: {"type": kind}}, "required": [prop]}


def _tighten_limits(schemas: dict[str, Any]) -> None:
    """The limit objects' rules on which fields go together, as the request models check them."""
    if "ConcurrencyIn" in schemas:
        schemas["ConcurrencyIn"]["anyOf"] = [
            _given("limit", "integer"),
            {"properties": {"key": {"type": "null"}, "limit": {"type": "null"}}},
        ]
        schemas["ConcurrencyIn"]["description"] += " A key needs a limit."
    if "RateLimitIn" in schemas:
        nothing = {"type": "null"}
        schemas["RateLimitIn"]["anyOf"] = [
            _given("per_second", "number"),
            {"properties": {"key": nothing, "burst": nothing, "per_second": nothing}},
        ]
        schemas["RateLimitIn"]["description"] += " A key or a burst needs per_second."
    if "TenantLimitIn" in schemas:
        nothing = {"type": "null"}
        schemas["TenantLimitIn"]["anyOf"] = [
            _given("runs_per_second", "number"),
            {
                **_given("max_running", "integer"),
                "properties": {
                    "max_running": {"type": "integer"},
                    "runs_per_second": nothing,
                    "burst": nothing,
                },
            },
        ]
        schemas["TenantLimitIn"]["description"] += (
            " At least one of max_running and runs_per_second; burst needs runs_per_second."
        )


def _tighten_nodes(schemas: dict[str, Any]) -> None:
    """A workflow's graph rules, which JSON Schema cannot state, in words (the API checks them)."""
    node = schemas.get("NodeIn")
    if node is None:
        return
    node["properties"]["depends_on"]["description"] = (
        "ids of other nodes of the same workflow, each at most once; the graph has no cycle and at "
        "most 500 edges in all"
    )
    node["properties"]["id"]["description"] = "unique within the workflow"
    node["properties"]["retry"] = {
        "$ref": f"{_REF}RetryIn",
        "description": "retry policy; base_seconds must be <= max_seconds",
    }


def _tighten_parameters(paths: dict[str, Any]) -> None:
    for path, item in paths.items():
        for _method, operation in item.items():
            if not isinstance(operation, dict):
                continue
            for parameter in operation.get("parameters", []):
                name, where = parameter.get("name", "").lower(), parameter.get("in")
                schema = parameter.setdefault("schema", {})
                if where == "header" and name == "if-match":
                    parameter["required"] = True
                    parameter["schema"] = {**_without_null(schema), "pattern": IF_MATCH_PATTERN}
                elif where == "header" and name == "idempotency-key":
                    _set_string(schema, pattern=IDEMPOTENCY_KEY_PATTERN)
                elif where == "query" and name == "cursor":
                    _set_string(schema, pattern=CURSOR_PATTERN)
                    parameter["description"] = (
                        "next_cursor of the previous page, unchanged, or empty for the first page (opaque: "
                        "only a cursor this API issued for this list, filters and tenant is accepted, as "
                        "its checksum shows; any other answers 400, even one that matches the pattern)"
                    )
                    schema["description"] = parameter["description"]
                elif where == "query" and path == "/schedules/preview" and name == "schedule":
                    _set_string(schema, format=SCHEDULE_FORMAT)
                elif where == "query" and path == "/schedules/preview" and name == "timezone":
                    parameter["schema"] = {"$ref": f"{_REF}TimeZone", "default": schema.get("default", "UTC")}
                elif (where == "path" and name == "job_id") or (
                    where == "query" and name == "job_id" and path == "/runs"
                ):
                    _set_string(schema, pattern=JOB_ID_PATTERN)
                elif where == "query" and path == "/usage" and name in ("from", "to"):
                    _set_string(schema, format="date")
                    parameter["description"] = (
                        f"{'first' if name == 'from' else 'last'} UTC day, YYYY-MM-DD (default: "
                        f"{'6 days before to' if name == 'from' else 'today'}); from <= to, at most "
                        "31 days"
                    )


def _operation_ids(paths: dict[str, Any]) -> dict[tuple[str, str], str]:
    return {
        (method, path): operation["operationId"]
        for path, item in paths.items()
        for method, operation in item.items()
        if isinstance(operation, dict) and "operationId" in operation
    }


_JOB = "$response.body#/id"


def _job_links(version: str) -> list[tuple[str, str, str, dict[str, str]]]:
    job = {"path.job_id": _JOB}
    versioned = {**job, "header.if-match": version}
    return [
        ("GetJob", "get", "/jobs/{job_id}", job),
        ("UpdateJob", "patch", "/jobs/{job_id}", versioned),
        ("DeleteJob", "delete", "/jobs/{job_id}", versioned),
        ("PauseJob", "post", "/jobs/{job_id}/pause", job),
        ("ResumeJob", "post", "/jobs/{job_id}/resume", job),
        ("TriggerJob", "post", "/jobs/{job_id}/trigger", job),
        ("BackfillJob", "post", "/jobs/{job_id}/backfill", job),
        ("ListJobRuns", "get", "/jobs/{job_id}/runs", job),
        ("ListRunsOfJob", "get", "/runs", {"query.job_id": _JOB}),
        ("ListDeadLettersOfJob", "get", "/dead-letters", {"query.job_id": _JOB}),
    ]


def _run_links(expression: str) -> list[tuple[str, str, str, dict[str, str]]]:
    run = {"path.run_id": expression}
    return [
        ("GetRun", "get", "/runs/{run_id}", run),
        ("GetRunLogs", "get", "/runs/{run_id}/logs", run),
        ("CancelRun", "post", "/runs/{run_id}/cancel", run),
        ("RetryRun", "post", "/runs/{run_id}/retry", run),
        ("ReplayDeadLetter", "post", "/dead-letters/{run_id}/replay", run),
        ("DiscardDeadLetter", "delete", "/dead-letters/{run_id}", run),
    ]


def _workflow_links(version: str) -> list[tuple[str, str, str, dict[str, str]]]:
    workflow = {"path.workflow_id": _JOB}
    versioned = {**workflow, "header.if-match": version}
    return [
        ("GetWorkflow", "get", "/workflows/{workflow_id}", workflow),
        ("UpdateWorkflow", "patch", "/workflows/{workflow_id}", versioned),
        ("DeleteWorkflow", "delete", "/workflows/{workflow_id}", versioned),
        ("PauseWorkflow", "post", "/workflows/{workflow_id}/pause", workflow),
        ("ResumeWorkflow", "post", "/workflows/{workflow_id}/resume", workflow),
        ("TriggerWorkflow", "post", "/workflows/{workflow_id}/runs", workflow),
        ("BackfillWorkflow", "post", "/workflows/{workflow_id}/backfill", workflow),
        ("ListWorkflowRuns", "get", "/workflows/{workflow_id}/runs", workflow),
    ]


def _workflow_run_links(expression: str) -> list[tuple[str, str, str, dict[str, str]]]:
    run = {"path.run_id": expression}
    return [
        ("GetWorkflowRun", "get", "/workflow-runs/{run_id}", run),
        ("CancelWorkflowRun", "post", "/workflow-runs/{run_id}/cancel", run),
        ("RetryWorkflowRun", "post", "/workflow-runs/{run_id}/retry", run),
    ]


def link_table() -> dict[tuple[str, str, str], list[tuple[str, str, str, dict[str, str]]]]:
    """(from method, from path, status) -> [(link name, to method, to path, parameters)]: which
    response leads to which operation, with the parameters it supplies."""
    # an ETag, "<version>" (a header is a string; the bare expression gave the number 4)
    version = '"{$response.body#/version}"'
    run_of_job = [("GetJobOfRun", "get", "/jobs/{job_id}", {"path.job_id": "$response.body#/job_id"})]
    return {
        ("post", "/jobs", "201"): _job_links(version),
        ("get", "/jobs/{job_id}", "200"): _job_links(version),
        ("patch", "/jobs/{job_id}", "200"): _job_links(version),
        ("post", "/jobs/{job_id}/pause", "200"): _job_links(version),
        ("post", "/jobs/{job_id}/resume", "200"): _job_links(version),
        ("post", "/jobs/{job_id}/trigger", "201"): _run_links("$response.body#/id") + run_of_job,
        ("post", "/jobs/{job_id}/backfill", "201"): _run_links("$response.body#/runs/0/id"),
        ("post", "/jobs/{job_id}/backfill", "202"): [
            (
                "GetBackfill",
                "get",
                "/jobs/{job_id}/backfills/{backfill_id}",
                {"path.job_id": "$response.body#/job_id", "path.backfill_id": "$response.body#/id"},
            )
        ],
        ("get", "/jobs/{job_id}/runs", "200"): _run_links("$response.body#/items/0/id"),
        ("get", "/runs", "200"): _run_links("$response.body#/items/0/id"),
        ("get", "/runs/{run_id}", "200"): _run_links("$response.body#/id") + run_of_job,
        ("post", "/runs/{run_id}/cancel", "200"): _run_links("$response.body#/id"),
        ("post", "/runs/{run_id}/retry", "200"): _run_links("$response.body#/id"),
        ("post", "/dead-letters/{run_id}/replay", "200"): _run_links("$response.body#/id"),
        ("get", "/dead-letters", "200"): _run_links("$response.body#/items/0/run_id"),
        ("post", "/workflows", "201"): _workflow_links(version),
        ("get", "/workflows/{workflow_id}", "200"): _workflow_links(version),
        ("patch", "/workflows/{workflow_id}", "200"): _workflow_links(version),
        ("post", "/workflows/{workflow_id}/pause", "200"): _workflow_links(version),
        ("post", "/workflows/{workflow_id}/resume", "200"): _workflow_links(version),
        ("post", "/workflows/{workflow_id}/runs", "201"): _workflow_run_links("$response.body#/id"),
        ("post", "/workflows/{workflow_id}/backfill", "201"): _workflow_run_links(
            "$response.body#/runs/0/id"
        ),
        ("get", "/workflows/{workflow_id}/runs", "200"): _workflow_run_links("$response.body#/items/0/id"),
        ("get", "/workflow-runs/{run_id}", "200"): _workflow_run_links("$response.body#/id"),
        ("post", "/workflow-runs/{run_id}/cancel", "200"): _workflow_run_links("$response.body#/id"),
        ("post", "/workflow-runs/{run_id}/retry", "200"): _workflow_run_links("$response.body#/id"),
    }


def _add_links(paths: dict[str, Any]) -> None:
    ids = _operation_ids(paths)
    for (method, path, status), links in link_table().items():
        response = paths.get(path, {}).get(method, {}).get("responses", {}).get(status)
        if response is None:
            continue
        out = response.setdefault("links", {})
        for name, to_method, to_path, parameters in links:
            operation_id = ids.get((to_method, to_path))
            if operation_id is not None:
                out[name] = {"operationId": operation_id, "parameters": dict(parameters)}


_CONSTRAINT_KEYWORDS = {"ge": "minimum", "le": "maximum", "gt": "exclusiveMinimum", "lt": "exclusiveMaximum"}


def _json_schema_keywords(node: Any) -> None:
    """Pydantic writes a ``Field(ge=...)`` on an ``Annotated`` type with a validator as ``ge``/``le``,
    which JSON Schema ignores: rename them to ``minimum``/``maximum`` (the bounds the API checks)."""
    if isinstance(node, dict):
        if node.get("type") in ("integer", "number"):
            for short, keyword in _CONSTRAINT_KEYWORDS.items():
                if short in node:
                    node[keyword] = node.pop(short)
        for value in node.values():
            _json_schema_keywords(value)
    elif isinstance(node, list):
        for value in node:
            _json_schema_keywords(value)


def tighten(document: dict[str, Any], facts: DeploymentFacts) -> dict[str, Any]:
    """Return the document with the API's own rules and the links between its operations."""
    _json_schema_keywords(document)
    paths = document.get("paths", {})
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    if "JobIn" in schemas:
        _tighten_bodies(schemas, facts)
    _tighten_parameters(paths)
    _add_links(paths)
    return document
