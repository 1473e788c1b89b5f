"""Domain errors -> HTTP responses, in one place.

Every response that is not a success has the body ``{"error": "<code>", "message": "<what to fix>"}``.
The status comes from the error's category in :mod:`jobsched.core.errors`; the two API-only
categories (a malformed request, a caller without the right) are defined here because only the HTTP
layer raises them.
"""

from __future__ import annotations

import json
import logging
from http import HTTPStatus
from typing import Any

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.api_gateway import ApiGatewayResolver
from aws_lambda_powertools.event_handler.exceptions import NotFoundError as RouteNotFound
from aws_lambda_powertools.event_handler.openapi.exceptions import (
    RequestUnsupportedContentType,
    RequestValidationError,
)

from jobsched.core.errors import (
    ConflictError,
    JobschedError,
    NotFoundError,
    PayloadTooLargeError,
    PreconditionFailedError,
    UnauthorizedError,
    ValidationError,
)

logger = logging.getLogger(__name__)


class BadRequestError(ValidationError):
    """Raised when a request cannot be read at all: malformed JSON, a body that is not UTF-8, a
    tampered pagination cursor, a header in the wrong form. Answered with 400."""

    code = "bad_request"


class UnsupportedMediaTypeError(BadRequestError):
    """Raised when a request carries a body that is not ``application/json`` (every route takes JSON).
    Answered with 415."""

    code = "unsupported_media_type"


class PreconditionRequiredError(BadRequestError):
    """Raised when a change that needs ``If-Match: <version>`` comes without it. Answered with 428."""

    code = "precondition_required"


class ForbiddenError(JobschedError):
    """Raised when an authenticated caller asks for something only an administrator may do (the
    ``/admin`` routes). Answered with 403."""

    code = "forbidden"


# Most specific first: a subclass must be looked up before its base.
_STATUS_BY_ERROR: tuple[tuple[type[JobschedError], HTTPStatus], ...] = (
    (PayloadTooLargeError, HTTPStatus.REQUEST_ENTITY_TOO_LARGE),
    (PreconditionRequiredError, HTTPStatus.PRECONDITION_REQUIRED),
    (UnsupportedMediaTypeError, HTTPStatus.UNSUPPORTED_MEDIA_TYPE),
    (BadRequestError, HTTPStatus.BAD_REQUEST),
    (ValidationError, HTTPStatus.UNPROCESSABLE_ENTITY),
    (NotFoundError, HTTPStatus.NOT_FOUND),
    (PreconditionFailedError, HTTPStatus.PRECONDITION_FAILED),
    (ConflictError, HTTPStatus.CONFLICT),
    (UnauthorizedError, HTTPStatus.UNAUTHORIZED),
    (ForbiddenError, HTTPStatus.FORBIDDEN),
)

ERROR_HEADERS = {"Cache-Control": "no-store"}


def status_for(error: JobschedError) -> HTTPStatus:
    """The HTTP status of a domain error; 500 for a category the API never expects to see."""
    for error_type, status in _STATUS_BY_ERROR:
        if isinstance(error, error_type):
            return status
    return HTTPStatus.INTERNAL_SERVER_ERROR


def error_body(code: str, message: str) -> dict[str, str]:
    return {"error": code, "message": message}


def error_response(status: int, code: str, message: str) -> Response:
    """A Powertools response with the error body (used by routes, exception handlers and the gate)."""
    headers = dict(ERROR_HEADERS)
    if status == HTTPStatus.UNAUTHORIZED:
        headers["WWW-Authenticate"] = 'Bearer realm="jobsched"'
    return Response(
        status_code=int(status),
        content_type=content_types.APPLICATION_JSON,
        body=json.dumps(error_body(code, message)),
        headers=headers,
    )


def domain_error_response(error: JobschedError) -> Response:
    status = status_for(error)
    if status == HTTPStatus.INTERNAL_SERVER_ERROR:
        logger.exception("unexpected domain error in the API: %s", error)
        return error_response(status, "internal_error", "internal error; the request id is in the logs")
    return error_response(status, error.code, error.message)


def raw_error_response(error: JobschedError) -> dict[str, Any]:
    """The API Gateway (payload v2) response dict for an error found before routing."""
    response = domain_error_response(error)
    return {
        "statusCode": response.status_code,
        "headers": response.headers,
        "body": response.body,
        "isBase64Encoded": False,
        "cookies": [],
    }


def describe_validation_errors(errors: list[dict[str, Any]]) -> str:
    """``"<field>: <what is wrong>"`` for each pydantic error, joined by ``"; "``.

    The location drops Powertools' ``body`` prefix and pydantic's union-member names, so a client
    reads ``target.http.url: Field required`` rather than a Python type name."""
    parts: list[str] = []
    for error in errors:
        loc = [str(p) for p in error.get("loc", ()) if p not in ("body", "query", "header", "path")]
        field = ".".join(loc) or "body"
        message = str(error.get("msg", "is invalid")).removeprefix("Value error, ")
        if error.get("type") == "missing" and not loc:
            field, message = "body", "a JSON object is required"
        part = f"{field}: {message}"
        if part not in parts:
            parts.append(part)
    return "; ".join(parts[:10])


def allowed_methods(app: ApiGatewayResolver, path: str) -> list[str]:
    """The methods the app routes for ``path`` (sorted; empty when no route has the path). Read from
    Powertools' route table, so a route added anywhere is counted."""
    # A concrete path wins over a template (OpenAPI's rule): /dead-letters/replay is not a run id.
    for routes in (app._static_routes, app._dynamic_routes):
        methods = {route.method.upper() for route in routes if route.rule.match(path)}
        if methods:
            return sorted(methods)
    return []


def register_error_handlers(app: ApiGatewayResolver) -> None:
    """Install the exception handlers that turn every error into ``{"error", "message"}``."""

    @app.exception_handler(JobschedError)
    def _domain(error: JobschedError) -> Response:
        return domain_error_response(error)

    @app.exception_handler(RequestValidationError)
    def _validation(error: RequestValidationError) -> Response:
        errors = list(error.errors())
        if any(e.get("type") == "json_invalid" for e in errors):
            return error_response(
                HTTPStatus.BAD_REQUEST, "malformed_json", "the request body is not valid JSON"
            )
        return error_response(
            HTTPStatus.UNPROCESSABLE_ENTITY, "validation_error", describe_validation_errors(errors)
        )

    @app.exception_handler(RequestUnsupportedContentType)
    def _content_type(error: RequestUnsupportedContentType) -> Response:
        return error_response(
            HTTPStatus.UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type", "send the body as application/json"
        )

    @app.exception_handler(RouteNotFound)
    def _no_route(error: RouteNotFound) -> Response:
        event = app.current_event
        allowed = allowed_methods(app, event.path)
        if allowed:
            response = error_response(
                HTTPStatus.METHOD_NOT_ALLOWED,
                "method_not_allowed",
                f"{event.http_method} is not a method of {event.path}; allowed: {', '.join(allowed)}",
            )
            response.headers["Allow"] = ", ".join(allowed)
            return response
        return error_response(
            HTTPStatus.NOT_FOUND, "not_found", f"no route {event.http_method} {event.path}; see /openapi.json"
        )

    @app.exception_handler(Exception)
    def _unexpected(error: Exception) -> Response:
        logger.exception("unhandled error in the API")
        return error_response(
            HTTPStatus.INTERNAL_SERVER_ERROR,
            "internal_error",
            "internal error; the request id is in the logs",
        )
