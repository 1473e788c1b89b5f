"""functions/api.py on moto: schedules as code through the deployed function's own boto3 clients, so
its DynamoDB calls (the name item's conditional put and delete, the tenant's Query of declared names)
are recorded for the permissions-by-use check, and the name item's conditions hold on DynamoDB."""

from __future__ import annotations

from tests.api.conftest import JOB
from tests.api.events import ACME, body_of, http_event
from tests.aws.conftest import aws, aws_environ  # noqa: F401 - the moto fixtures, exported as the environment
from tests.functions.test_handler import LambdaContext, handler  # noqa: F401 - the function's fixture

DEFINITION = {k: v for k, v in JOB.items() if k != "name"}


def test_declare_redeclare_list_and_delete_on_dynamodb(handler):  # noqa: F811
    # Given the deployed API function on moto
    def call(method, path, **kwargs):
        return handler(http_event(method, path, headers=ACME, **kwargs), LambdaContext())

    # When a name is declared twice with the same definition, then changed
    created = call("PUT", "/jobs/by-name/nightly", body=DEFINITION)
    again = call("PUT", "/jobs/by-name/nightly", body=DEFINITION)
    changed = call("PUT", "/jobs/by-name/nightly", body={**DEFINITION, "schedule": "0 4 * * *"})
    # Then created (201), unchanged (200, version 1), updated (version 2)
    assert created["statusCode"] == 201, created["body"]
    assert (body_of(again)["outcome"], body_of(again)["job"]["version"]) == ("unchanged", 1)
    assert (body_of(changed)["outcome"], body_of(changed)["job"]["version"]) == ("updated", 2)
    job_id = body_of(created)["job"]["id"]
    # And the name is listed as declared, and released when its job is deleted
    listed = body_of(call("GET", "/declared"))["items"]
    assert listed == [{"name": "nightly", "kind": "job", "id": job_id, "version": 2}]
    deleted = handler(
        http_event("DELETE", f"/jobs/{job_id}", headers={**ACME, "If-Match": '"2"'}), LambdaContext()
    )
    assert deleted["statusCode"] == 200, deleted["body"]
    assert body_of(call("GET", "/declared"))["items"] == []
    # And the listing of jobs never shows the name item
    assert body_of(call("GET", "/jobs"))["items"] == []
