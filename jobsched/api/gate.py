"""What every request goes through before routing: authentication and the body checks.

Powertools validates a request's body before any user middleware runs, so a caller without
credentials would learn about schema errors first. The gate runs earlier, in
:meth:`jobsched.api.app.JobschedResolver.resolve`: it answers 401/403 before anything else, then 413
for an oversized body, 415 for a body that is not ``application/json`` and 400 for one that is not
UTF-8 or not JSON, and otherwise leaves the
caller's :class:`~jobsched.api.auth.Identity` for the routes (see :mod:`jobsched.api.deps`).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from typing import Any

from jobsched.api.auth import Authenticator, Identity
from jobsched.api.errors import BadRequestError, ForbiddenError, UnsupportedMediaTypeError
from jobsched.console import CONSOLE_PATH
from jobsched.core.errors import PayloadTooLargeError, UnauthorizedError, ValidationError

#: Routes that answer without credentials.
PUBLIC_PATHS = frozenset({"/", "/health", "/openapi.json", "/docs"})
#: The operator console's static files (``/ui`` and everything below it) answer without credentials
#: too: they hold no tenant data (:mod:`jobsched.api.routes.console`).
PUBLIC_PREFIX = CONSOLE_PATH
ADMIN_PREFIX = "/admin/"
#: Request bodies above this are refused with 413 before they are parsed.
MAX_BODY_BYTES = 256 * 1024


def request_path(event: Mapping[str, Any]) -> str:
    http = (event.get("requestContext") or {}).get("http") or {}
    path = event.get("rawPath") or http.get("path") or "/"
    return path.rstrip("/") or "/"


def is_console_path(path: str) -> bool:
    """``/ui`` or a path below it (already stripped of a trailing slash by :func:`request_path`)."""
    return path == PUBLIC_PREFIX or path.startswith(PUBLIC_PREFIX + "/")


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def parse_json(text: str) -> Any:
    """Strict JSON: no NaN/Infinity (DynamoDB and other clients cannot hold them)."""
    return json.loads(text, parse_constant=_reject_constant)


def check_body(event: Mapping[str, Any]) -> None:
    """Raise 413 for an oversized body, 400 for one that is not UTF-8 or (when JSON) not parseable."""
    body = event.get("body")
    if body is None or body == "":
        return
    if not isinstance(body, str):
        raise BadRequestError("the request body must be text")
    if event.get("isBase64Encoded"):
        if len(body) > (MAX_BODY_BYTES * 4) // 3 + 4:
            raise PayloadTooLargeError(f"the request body is over {MAX_BODY_BYTES // 1024} KiB")
        try:
            raw = base64.b64decode(body, validate=True)
        except (binascii.Error, ValueError) as error:
            raise BadRequestError("the request body is not valid base64") from error
    else:
        if len(body) > MAX_BODY_BYTES:  # characters <= bytes: a cheap early refusal
            raise PayloadTooLargeError(f"the request body is over {MAX_BODY_BYTES // 1024} KiB")
        try:
            raw = body.encode("utf-8")
        except UnicodeEncodeError as error:
            raise BadRequestError("the request body is not valid UTF-8") from error
    if len(raw) > MAX_BODY_BYTES:
        raise PayloadTooLargeError(f"the request body is over {MAX_BODY_BYTES // 1024} KiB")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise BadRequestError("the request body is not valid UTF-8") from error
    headers = {str(k).lower(): v for k, v in (event.get("headers") or {}).items()}
    content_type = str(headers.get("content-type", "")).strip().lower()
    if content_type and not content_type.startswith("application/json"):
        # Every route takes JSON; refused here, before Powertools would try to parse a form or a
        # multipart body (a multipart type without a boundary made it raise: a 500).
        raise UnsupportedMediaTypeError(
            f"send the body as application/json, not {content_type.split(';')[0][:60]}"
        )
    try:
        document = parse_json(text)
    except (ValueError, RecursionError) as error:
        raise BadRequestError(f"the request body is not valid JSON: {error}"[:300]) from error
    if document is not None and not isinstance(document, dict):
        # Every body is an object (or null where a body is optional); Powertools would read a list's
        # items as absent fields and accept it.
        raise ValidationError("body: a JSON object is required", field="body")


#: Deployment-wide routes an administrator with no tenant may call (the code's handlers are not a
#: tenant's).
HANDLERS_PREFIX = "/handlers/"


def admit(event: Mapping[str, Any], authenticator: Authenticator) -> Identity | None:
    """The caller's identity (``None`` on a public route); raises the 4xx error that stops the request."""
    path = request_path(event)
    if path in PUBLIC_PATHS or is_console_path(path):
        return None
    identity = authenticator.authenticate(event)
    if (path + "/").startswith(ADMIN_PREFIX):
        if not identity.is_admin:
            raise ForbiddenError(f"principal {identity.principal} is not an administrator")
    elif identity.tenant is None and not (identity.is_admin and (path + "/").startswith(HANDLERS_PREFIX)):
        # An administrator mapped to no tenant may still read every tenant's references to handlers
        # (GET /handlers?scope=all, what `jobsched deploy-check` asks) and mark versions draining; the
        # tenant-scoped view answers 401 for it in the route (decision 0050).
        raise UnauthorizedError(
            f"principal {identity.principal} is mapped to no tenant; an administrator maps it with "
            "PUT /admin/principals"
        )
    check_body(event)
    return identity
