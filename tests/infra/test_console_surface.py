"""The AWS console surface (issue 31 §6): tags on every resource, the dashboard's explicit name, the
Logs Insights saved queries, and alarm descriptions that link to their section of operations.md."""

from __future__ import annotations

import json
import re
from pathlib import Path

import aws_cdk as cdk
import pytest

from infra.config import ConfigError, StackConfig
from infra.queries import RUN_ID_PLACEHOLDER
from infra.tags import component_name
from tests.infra.conftest import USER_TAGS

OPERATIONS = Path(__file__).resolve().parents[2] / "docs" / "operations.md"


def _tags_of(synth, resource: cdk.CfnResource) -> dict[str, str]:
    props = synth.template["Resources"][synth.stack.resolve(resource.logical_id)].get("Properties", {})
    name = resource.tags.tag_property_name  # CDK's camel case: tags, userPoolTags...
    tags = props.get(name[0].upper() + name[1:], {})
    if isinstance(tags, list):
        return {t["Key"]: t["Value"] for t in tags}
    return dict(tags)


def _taggable(synth) -> list[cdk.CfnResource]:
    return [
        c
        for c in synth.stack.node.find_all()
        if isinstance(c, cdk.CfnResource) and cdk.TagManager.is_taggable(c)
    ]


def test_every_taggable_resource_has_application_stack_and_component(synth):
    resources = _taggable(synth)
    assert len(resources) > 50  # tables, queues, functions, roles, alarms, the VPC...
    for resource in resources:
        tags = _tags_of(synth, resource)
        assert tags.get("application") == "jobsched", resource.node.path
        assert tags.get("stack") == "Jobsched", resource.node.path
        top = resource.node.scopes[2].node.id  # the stack's child it belongs to (0: the app, 1: the stack)
        assert tags.get("component") == component_name(top), resource.node.path


def test_components_name_the_stacks_constructs():
    assert [component_name(i) for i in ("Tables", "LongJobs", "ContainerPool", "Api")] == [
        "tables",
        "long-jobs",
        "container-pool",
        "api",
    ]


def test_the_users_context_tags_are_on_every_taggable_resource(cmk_synth):
    # Given -c tags='{"team": "payments", "cost-center": "42"}' / Then every taggable resource has them
    wanted = json.loads(USER_TAGS)
    for resource in _taggable(cmk_synth):
        tags = _tags_of(cmk_synth, resource)
        assert {k: tags.get(k) for k in wanted} == wanted, resource.node.path


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ('{"stack": "mine"}', "'stack' is set by the stack itself"),
        ('{"aws:team": "x"}', "must be 1 to 128"),
        ('{"team": 7}', "tags="),
        ('["team"]', "tags="),
        ('{"team": "a#b"}', "tags[team]"),
    ],
)
def test_bad_tags_are_refused_naming_the_field(raw, field):
    with pytest.raises(ConfigError, match=re.escape(field)):
        StackConfig.from_context({"tags": raw}.get)


def test_dashboard_has_an_explicit_name_of_stack_and_region(synth):
    (dashboard,) = synth.resources("AWS::CloudWatch::Dashboard").values()
    assert dashboard["Properties"]["DashboardName"] == {
        "Fn::Join": ["-", ["Jobsched", {"Ref": "AWS::Region"}]]
    }


def _queries(synth) -> dict[str, dict]:
    return {
        q["Properties"]["Name"]: q["Properties"]
        for q in synth.resources("AWS::Logs::QueryDefinition").values()
    }


def test_saved_queries_are_in_the_stacks_folder_and_read_the_functions_log_groups(synth):
    queries = _queries(synth)
    assert set(queries) == {
        "Jobsched/a run's lines",
        "Jobsched/errors by job",
        "Jobsched/dead letters (set the range to today)",
        "Jobsched/slowest runs",
    }
    functions = synth.stack.functions
    worker_logs = {"Ref": synth.logical_id(functions["worker"].log_group)}
    failing = [worker_logs] + [
        {"Ref": synth.logical_id(functions[n].log_group)} for n in ("dlq_consumer", "sweeper")
    ]
    assert queries["Jobsched/a run's lines"]["LogGroupNames"] == [worker_logs]
    assert queries["Jobsched/slowest runs"]["LogGroupNames"] == [worker_logs]
    assert queries["Jobsched/errors by job"]["LogGroupNames"] == failing
    assert queries["Jobsched/dead letters (set the range to today)"]["LogGroupNames"] == failing


def test_saved_queries_filter_on_the_keys_the_functions_write(synth):
    queries = {name.split("/", 1)[1]: q["QueryString"] for name, q in _queries(synth).items()}
    assert f'filter run_id = "{RUN_ID_PLACEHOLDER}"' in queries["a run's lines"]
    assert "by tenant, job_id" in queries["errors by job"]
    assert 'filter outcome = "dead_lettered"' in queries["dead letters (set the range to today)"]
    assert "sort duration_seconds desc" in queries["slowest runs"]


def _anchors() -> set[str]:
    """GitHub's anchor of each heading of docs/operations.md."""
    anchors = set()
    for line in OPERATIONS.read_text().splitlines():
        if match := re.match(r"^#{1,6} (.+)$", line):
            slug = re.sub(r"[^\w\- ]", "", match.group(1).strip().lower()).replace(" ", "-")
            anchors.add(slug)
    return anchors


def test_every_alarm_links_to_an_existing_section_of_operations_md(synth):
    anchors = _anchors()
    for name, alarm in synth.stack.observability.alarms.items():
        description = synth.template["Resources"][synth.logical_id(alarm)]["Properties"]["AlarmDescription"]
        match = re.search(r" Runbook: docs/operations\.md#([\w-]+)$", description)
        assert match, f"{name}: {description!r} ends with no runbook link"
        assert match.group(1) in anchors, f"{name}: no heading of operations.md has anchor #{match.group(1)}"


def test_docs_url_must_be_an_https_url():
    config = StackConfig.from_context({"docs_url": "https://example.com/jobsched/docs/"}.get)
    assert config.docs_url == "https://example.com/jobsched/docs/"
    with pytest.raises(ConfigError, match="docs_url"):
        StackConfig.from_context({"docs_url": "ftp://x"}.get)
