"""Public routes: /health, /openapi.json, /docs, and what an unknown route answers."""

from __future__ import annotations

from openapi_spec_validator import validate

from tests.api.events import ACME, body_of


def test_health_answers_without_credentials(call):
    # Given no Authorization header
    # When GET /health
    response = call("GET", "/health")
    # Then 200 with the status, the version and the server time from the injected clock
    assert response["statusCode"] == 200
    assert body_of(response) == {"status": "ok", "version": "0.1.0", "time": "2026-03-02T12:00:00.000Z"}


def test_openapi_document_is_valid_openapi_3(call):
    # When GET /openapi.json without credentials
    response = call("GET", "/openapi.json")
    # Then it is a valid OpenAPI 3.1 document
    assert response["statusCode"] == 200
    document = body_of(response)
    validate(document)
    assert document["openapi"].startswith("3.")


def test_openapi_lists_every_route(call):
    document = body_of(call("GET", "/openapi.json"))
    operations = {(m.upper(), p) for p, item in document["paths"].items() for m in item}
    assert operations == {
        ("GET", "/health"),
        ("GET", "/schedules/preview"),
        ("GET", "/admin/principals"),
        ("PUT", "/admin/principals"),
        ("DELETE", "/admin/principals"),
        ("POST", "/jobs"),
        ("GET", "/jobs"),
        ("GET", "/jobs/{job_id}"),
        ("PATCH", "/jobs/{job_id}"),
        ("DELETE", "/jobs/{job_id}"),
        ("POST", "/jobs/{job_id}/pause"),
        ("POST", "/jobs/{job_id}/resume"),
        ("POST", "/jobs/{job_id}/trigger"),
        ("POST", "/jobs/{job_id}/backfill"),
        ("GET", "/jobs/{job_id}/backfills/{backfill_id}"),
        ("GET", "/jobs/{job_id}/runs"),
        ("GET", "/jobs/{job_id}/history"),
        ("GET", "/runs"),
        ("GET", "/runs/{run_id}"),
        ("POST", "/runs/{run_id}/cancel"),
        ("GET", "/runs/{run_id}/logs"),
        ("POST", "/runs/{run_id}/retry"),
        ("GET", "/dead-letters"),
        ("POST", "/dead-letters/replay"),
        ("POST", "/dead-letters/{run_id}/replay"),
        ("DELETE", "/dead-letters/{run_id}"),
        ("GET", "/settings/notify"),
        ("PUT", "/settings/notify"),
        ("GET", "/limits"),
        ("GET", "/admin/tenants/limits"),
        ("GET", "/admin/tenants/{tenant}/limits"),
        ("PUT", "/admin/tenants/{tenant}/limits"),
        ("DELETE", "/admin/tenants/{tenant}/limits"),
        ("GET", "/usage"),
        ("GET", "/forecast"),
        ("GET", "/stats"),
        ("GET", "/stats/queues"),
        ("POST", "/workflows"),
        ("GET", "/workflows"),
        ("GET", "/workflows/{workflow_id}"),
        ("PATCH", "/workflows/{workflow_id}"),
        ("DELETE", "/workflows/{workflow_id}"),
        ("POST", "/workflows/{workflow_id}/pause"),
        ("POST", "/workflows/{workflow_id}/resume"),
        ("POST", "/workflows/{workflow_id}/runs"),
        ("GET", "/workflows/{workflow_id}/runs"),
        ("POST", "/workflows/{workflow_id}/backfill"),
        ("GET", "/workflow-runs/{run_id}"),
        ("POST", "/workflow-runs/{run_id}/cancel"),
        ("POST", "/workflow-runs/{run_id}/retry"),
        ("GET", "/handlers"),
        ("POST", "/handlers/{name}/versions/{version}/drain"),
        ("DELETE", "/handlers/{name}/versions/{version}/drain"),
        ("POST", "/handlers/deploy-checks"),
        ("GET", "/handlers/deploy-checks"),
        ("PUT", "/jobs/by-name/{name}"),
        ("PUT", "/workflows/by-name/{name}"),
        ("GET", "/declared"),
        ("GET", "/budget"),
        ("GET", "/admin/tenants/budgets"),
        ("GET", "/admin/tenants/{tenant}/budget"),
        ("PUT", "/admin/tenants/{tenant}/budget"),
        ("DELETE", "/admin/tenants/{tenant}/budget"),
    }


def test_openapi_documents_headers_and_statuses_of_a_versioned_update(call):
    operation = body_of(call("GET", "/openapi.json"))["paths"]["/jobs/{job_id}"]["patch"]
    headers = {p["name"].lower() for p in operation["parameters"] if p["in"] == "header"}
    assert "if-match" in headers
    assert {"404", "412", "422"} <= set(operation["responses"])


def test_openapi_documents_201_with_the_created_job(call):
    responses = body_of(call("GET", "/openapi.json"))["paths"]["/jobs"]["post"]["responses"]
    assert "200" not in responses
    assert responses["201"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/JobOut"
    }


def test_openapi_documents_the_error_body_not_powertools_default(call):
    # When the document is read
    document = body_of(call("GET", "/openapi.json"))
    # Then the 422 of the preview route points at ErrorOut, and Powertools' own schema is gone
    responses = document["paths"]["/schedules/preview"]["get"]["responses"]
    assert responses["422"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/ErrorOut"
    }
    assert "HTTPValidationError" not in document["components"]["schemas"]
    assert document["paths"]["/health"]["get"]["security"] == []


def test_swagger_ui_is_served_with_its_assets_inline(call):
    # When GET /docs
    response = call("GET", "/docs")
    # Then an HTML page that carries the Swagger UI bundle itself (no CDN needed) and the spec
    assert response["statusCode"] == 200
    assert response["headers"]["Content-Type"].startswith("text/html")
    html = response["body"]
    assert "SwaggerUIBundle" in html
    assert "cdn.jsdelivr.net" not in html and "unpkg.com" not in html
    assert '"/schedules/preview"' in html


def test_unknown_route_answers_404_in_the_error_shape(call):
    # Given an authenticated caller
    # When a route that does not exist is called
    response = call("GET", "/nope", headers=ACME)
    # Then 404 with {"error", "message"}
    assert response["statusCode"] == 404
    assert body_of(response) == {"error": "not_found", "message": "no route GET /nope; see /openapi.json"}


def test_the_root_sends_a_browser_to_the_swagger_ui_without_credentials(call):
    """Given no credentials (a browser opening the API's URL), When GET /,
    Then 302 to /docs (the console is at /ui), not a JSON 401"""
    response = call("GET", "/")
    assert response["statusCode"] == 302
    assert response["headers"]["Location"] == "/docs"
    assert body_of(response) == {"docs": "/docs", "openapi": "/openapi.json"}
