"""Bad requests get 400/413/422 with {"error", "message"}, before any route runs."""

from __future__ import annotations

from jobsched.api.errors import describe_validation_errors
from jobsched.api.gate import MAX_BODY_BYTES
from tests.api.events import body_of, http_event

ROOT = {"Authorization": "Bearer tok-root"}


def test_malformed_json_is_400(call):
    response = call("PUT", "/admin/principals", raw_body='{"principal": ', headers=ROOT)
    assert response["statusCode"] == 400
    assert body_of(response)["error"] == "bad_request"
    assert body_of(response)["message"].startswith("the request body is not valid JSON")


def test_nan_is_not_json(call):
    response = call("PUT", "/admin/principals", raw_body='{"principal": NaN}', headers=ROOT)
    assert response["statusCode"] == 400


def test_deeply_nested_json_is_400_not_500(call):
    response = call("PUT", "/admin/principals", raw_body="[" * 100_000 + "]" * 100_000, headers=ROOT)
    assert response["statusCode"] in (400, 413)
    assert body_of(response)["error"] in ("bad_request", "payload_too_large")


def test_body_over_the_limit_is_413(call):
    big = '{"principal": "' + "a" * MAX_BODY_BYTES + '"}'
    response = call("PUT", "/admin/principals", raw_body=big, headers=ROOT)
    assert response["statusCode"] == 413
    assert body_of(response) == {"error": "payload_too_large", "message": "the request body is over 256 KiB"}


def test_multibyte_body_over_the_limit_in_bytes_is_413(call):
    # Given a body under the limit in characters but over it in UTF-8 bytes
    big = '{"tenant": "' + "é" * (MAX_BODY_BYTES // 2 + 10) + '"}'
    response = call("PUT", "/admin/principals", raw_body=big, headers=ROOT)
    assert response["statusCode"] == 413


def test_invalid_base64_body_is_400(app):
    event = http_event("PUT", "/admin/principals", headers=ROOT)
    event["body"], event["isBase64Encoded"] = "!!!", True
    response = app.resolve(event, None)
    assert response["statusCode"] == 400
    assert body_of(response)["message"] == "the request body is not valid base64"


def test_base64_body_that_is_not_utf8_is_400(app):
    event = http_event("PUT", "/admin/principals", headers=ROOT)
    event["body"], event["isBase64Encoded"] = "/w==", True  # a lone 0xFF byte
    response = app.resolve(event, None)
    assert response["statusCode"] == 400
    assert body_of(response)["message"] == "the request body is not valid UTF-8"


def test_base64_json_body_is_accepted(call):
    mapping = {"principal": "account:123456789012", "tenant": "acme"}
    response = call("PUT", "/admin/principals", body=mapping, headers=ROOT, base64_body=True)
    assert response["statusCode"] == 200


def test_missing_field_is_422_naming_the_field(call):
    response = call("PUT", "/admin/principals", body={"principal": "account:123456789012"}, headers=ROOT)
    assert response["statusCode"] == 422
    assert body_of(response) == {"error": "validation_error", "message": "tenant: Field required"}


def test_unknown_field_is_422(call):
    body = {"principal": "account:123456789012", "tenant": "acme", "tennant": "x"}
    response = call("PUT", "/admin/principals", body=body, headers=ROOT)
    assert response["statusCode"] == 422
    assert body_of(response)["message"] == "tennant: Extra inputs are not permitted"


def test_body_that_is_not_an_object_is_422(call):
    response = call("PUT", "/admin/principals", body=[1, 2], headers=ROOT)
    assert response["statusCode"] == 422
    assert body_of(response)["error"] == "validation_error"


def test_missing_body_is_422(call):
    response = call("PUT", "/admin/principals", headers=ROOT)
    assert response["statusCode"] == 422
    assert body_of(response)["message"] == "body: a JSON object is required"


def test_unsupported_content_type_is_415(call):
    response = call("PUT", "/admin/principals", raw_body="a=b", headers={**ROOT, "content-type": "text/csv"})
    assert response["statusCode"] == 415
    assert body_of(response)["error"] == "unsupported_media_type"


def test_validation_messages_drop_locations_that_mean_nothing_to_a_client():
    errors = [
        {"loc": ("body", "target", "http", "url"), "msg": "Field required", "type": "missing"},
        {
            "loc": ("query", "limit"),
            "msg": "Input should be less than or equal to 200",
            "type": "less_than_equal",
        },
        {
            "loc": ("body", "retry"),
            "msg": "Value error, base_seconds must be <= max_seconds",
            "type": "value_error",
        },
    ]
    assert describe_validation_errors(errors) == (
        "target.http.url: Field required; limit: Input should be less than or equal to 200; "
        "retry: base_seconds must be <= max_seconds"
    )
