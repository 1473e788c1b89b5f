"""Run message envelopes (decision 0048, docs/semantics/runs.md "Envelope versions"): v=2 is written,
v=1 and v=2 are read, anything else is poison; and the run records' handler fields."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from jobsched.core.errors import ValidationError
from jobsched.core.messages import MESSAGE_VERSION, RunMessage
from jobsched.core.models import Job, Trigger, make_run_id
from jobsched.core.run_records import new_run, outgoing_for

T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
RUN_ID = make_run_id("job1", T0)


def body(**fields) -> dict:
    base = {
        "run_id": RUN_ID,
        "job_id": "job1",
        "tenant": "acme",
        "attempt": 1,
        "scheduled_at": "2026-03-02T12:00:00.000Z",
        "due_at": "2026-03-02T12:00:00.000Z",
        "target": {"handler": "report"},
        "payload": {"rows": 1},
    }
    return base | fields


def test_the_written_envelope_is_v2_with_the_payload_version():
    msg = RunMessage.from_json(json.dumps(body(v=2, payload_version=3)))
    written = msg.to_dict()
    assert MESSAGE_VERSION == 2 and written["v"] == 2 and written["payload_version"] == 3


def test_a_v1_envelope_reads_as_payload_version_1_and_unbound():
    msg = RunMessage.from_json(json.dumps(body(v=1)))
    assert (msg.payload_version, msg.handler, msg.handler_version) == (1, "report", None)
    assert msg.to_dict()["v"] == 2  # re-sent (a retry) in the current envelope


def test_a_v2_envelope_carries_the_bound_version_in_its_target():
    msg = RunMessage.from_json(json.dumps(body(v=2, target={"handler": "report", "version": 2})))
    assert (msg.handler_version, msg.payload_version) == (2, None)


@pytest.mark.parametrize("v", [None, 0, 3, "2", True])
def test_any_other_envelope_version_is_poison(v):
    with pytest.raises(ValidationError, match="unsupported run message version"):
        RunMessage.from_json(json.dumps(body(v=v)))


@pytest.mark.parametrize("payload_version", [0, "1", True, 1.5])
def test_a_malformed_payload_version_is_poison(payload_version):
    with pytest.raises(ValidationError, match="payload_version"):
        RunMessage.from_json(json.dumps(body(v=2, payload_version=payload_version)))


def test_binding_puts_the_version_in_the_target_of_a_handler_only():
    msg = RunMessage.from_json(json.dumps(body(v=2)))
    assert msg.bound_to(2).target == {"handler": "report", "version": 2}
    assert msg.bound_to(None) is msg
    http = RunMessage.from_json(json.dumps(body(v=2, target={"http": {"url": "https://x.test/"}})))
    assert http.bound_to(2) is http


def job(target: dict, payload_version: int | None = None) -> Job:
    return Job(
        id="job1",
        tenant="acme",
        name="n",
        schedule="@hourly",
        target=target,
        payload={"rows": 1},
        payload_version=payload_version,
        created_at=T0,
        updated_at=T0,
    )


@pytest.mark.parametrize(
    ("target", "payload_version", "run_fields", "message_payload_version"),
    [
        ({"handler": "report"}, 2, ("report", None), 2),  # unpinned: bound at the first claim
        ({"handler": "report", "version": 1}, 1, ("report", 1), 1),  # pinned from creation
        ({"handler": "report"}, None, ("report", None), 1),  # written before versions: payload version 1
        ({"http": {"url": "https://x.test/", "method": "POST"}}, None, (None, None), None),
    ],
)
def test_a_run_records_its_handler_and_its_message_the_payload_version(
    target, payload_version, run_fields, message_payload_version
):
    the_job = job(target, payload_version)
    run = new_run(the_job, T0, Trigger.SCHEDULE, T0)
    assert (run.handler, run.handler_version) == run_fields
    message = outgoing_for(the_job, run, T0).message
    assert message.payload_version == message_payload_version and message.target == target
