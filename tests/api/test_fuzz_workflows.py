"""Hypothesis fuzz of POST /workflows: never a 500, and a rejection writes nothing."""

from __future__ import annotations

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.api.events import ACME, http_event
from tests.api.test_fuzz_jobs import _check, awkward_numbers, field, json_value, schedules

ids = st.sampled_from(["a", "b", "c", "d", "bad id", "", "x" * 65]) | st.text(max_size=6)
node = st.fixed_dictionaries(
    {
        "id": field(ids),
        "target": field(st.sampled_from([{"handler": "demo.echo"}, {"handler": "no.such"}, {}])),
    },
    optional={
        "depends_on": field(st.lists(ids, max_size=4)),
        "trigger_rule": field(st.sampled_from(["all_success", "all_done", "one_failed", "one_success"])),
        "payload": field(
            st.dictionaries(
                st.sampled_from(["k", "upstream", "workflow_input"]), json_value | awkward_numbers, max_size=3
            )
        ),
        "timeout_seconds": field(st.integers(-5, 2000)),
        "retry": field(st.fixed_dictionaries({}, optional={"max_attempts": st.integers(-1, 200)})),
        "priority": field(st.sampled_from(["high", "default", "urgent"])),
        "extra": json_value,
    },
)
workflows = st.fixed_dictionaries(
    {
        "name": field(st.text(min_size=1, max_size=20)),
        "schedule": field(schedules),
        "nodes": field(st.lists(node, max_size=6)),
    },
    optional={
        "payload": field(st.dictionaries(st.text(max_size=5), json_value, max_size=3)),
        "target": json_value,
    },
)
CYCLE = {
    "name": "c",
    "schedule": "@daily",
    "nodes": [
        {"id": "a", "target": {"handler": "demo.echo"}, "depends_on": ["b"]},
        {"id": "b", "target": {"handler": "demo.echo"}, "depends_on": ["a"]},
    ],
}


@settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(body=workflows | json_value)
@example(body=CYCLE)
# A schedule with no occurrence left: once refused after the tenant's job counter was first written
@example(
    body={
        **CYCLE,
        "schedule": "at(2020-01-01T00:00:00)",
        "nodes": [{"id": "a", "target": {"handler": "demo.echo"}}],
    }
)
@example(body={**CYCLE, "nodes": [{"id": "a", "target": {"handler": "demo.echo"}, "payload": {"n": 10**45}}]})
def test_post_workflows_never_500_and_rejections_write_nothing(app, aws, body):
    _check(app, aws, http_event("POST", "/workflows", body=body, headers=ACME))
