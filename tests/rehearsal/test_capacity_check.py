"""The rehearsal's check of the capacity function's variables (jobsched/rehearsal/checks.py,
``check_capacity``), on mappings moto holds: right as infra/capacity.py writes them, then one wrong."""

from __future__ import annotations

import json

import pytest
from moto import mock_aws

from jobsched.aws.clients import Clients
from jobsched.rehearsal import checks
from jobsched.runtime import resources
from tests.aws.conftest import REGION, _fake_credentials
from tests.aws.moto_lambda import create_stub_function

BASE = {"high": 20, "default": 20, "low": 5, "long": 5}


@pytest.fixture
def deployed(monkeypatch):
    """Four queues, their mappings at BASE, and the variables the capacity function is given."""
    _fake_credentials(monkeypatch)
    with mock_aws():
        clients = Clients(region_name=REGION)
        lam = create_stub_function(clients)
        sqs = clients.client("sqs")
        env: dict[str, str] = {}
        for kind, base in BASE.items():
            url = sqs.create_queue(QueueName=f"jobsched-{kind}")["QueueUrl"]
            attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]
            arn = attributes["QueueArn"]
            uuid = lam.create_event_source_mapping(
                EventSourceArn=arn, FunctionName="worker", ScalingConfig={"MaximumConcurrency": base}
            )["UUID"]
            env[resources.ENV_QUEUE_URL_PREFIX + kind.upper()] = url
            env[resources.ENV_CAPACITY_MAPPING_PREFIX + kind.upper()] = uuid
        env[resources.ENV_CAPACITY_QUEUES] = json.dumps(
            {kind: {"base": base, "cap": base, "batch_size": 10} for kind, base in BASE.items()}
        )
        yield sqs, lam, env


def _failures(deployed) -> list[str]:
    sqs, lam, env = deployed
    report = checks.Report()
    checks.check_capacity(report, sqs, lam, env)
    assert report.results, "the check ran nothing"
    return [result.name for result in report.failures]


def test_the_variables_infra_writes_pass(deployed):
    assert _failures(deployed) == []


def test_a_mapping_variable_naming_another_queues_mapping_fails_by_name(deployed):
    _, _, env = deployed
    env["JOBSCHED_CAPACITY_MAPPING_LOW"] = env["JOBSCHED_CAPACITY_MAPPING_DEFAULT"]
    assert "capacity: JOBSCHED_CAPACITY_MAPPING_LOW is the low queue's mapping" in _failures(deployed)


def test_a_base_other_than_the_mappings_ceiling_fails_by_name(deployed):
    _, _, env = deployed
    policy = json.loads(env[resources.ENV_CAPACITY_QUEUES])
    policy["high"]["base"] = 40
    env[resources.ENV_CAPACITY_QUEUES] = json.dumps(policy)
    assert _failures(deployed) == ["capacity: the high base is its mapping's MaximumConcurrency"]


def test_without_the_function_nothing_is_checked(deployed):
    sqs, lam, _ = deployed
    report = checks.Report()
    checks.check_capacity(report, sqs, lam, {})
    assert report.results == []


OUTPUTS = {"ContainerCluster": "Jobsched-Cluster-1", "ContainerService": "Jobsched-Service-1"}


def _with_warm_tasks(env: dict[str, str], service: str) -> None:
    """What infra/capacity.py adds with -c capacity_max_warm_tasks=2."""
    policy = json.loads(env[resources.ENV_CAPACITY_QUEUES])
    policy[resources.CONTAINER_KIND] = {"base": 0, "cap": 2, "batch_size": 1}
    env[resources.ENV_CAPACITY_QUEUES] = json.dumps(policy)
    env[resources.ENV_CAPACITY_CONTAINER_SERVICE] = service


def test_warm_tasks_naming_the_container_pools_service_pass(deployed):
    sqs, lam, env = deployed
    _with_warm_tasks(env, "Jobsched-Cluster-1/Jobsched-Service-1")
    report = checks.Report()
    checks.check_capacity(report, sqs, lam, env, OUTPUTS)
    names = [result.name for result in report.results]
    assert "capacity: JOBSCHED_CAPACITY_CONTAINER_SERVICE is the container pool's service" in names
    assert report.failures == []


def test_warm_tasks_naming_another_service_fail_by_name(deployed):
    sqs, lam, env = deployed
    _with_warm_tasks(env, "Jobsched-Cluster-1/other")
    report = checks.Report()
    checks.check_capacity(report, sqs, lam, env, OUTPUTS)
    assert [result.name for result in report.failures] == [
        "capacity: JOBSCHED_CAPACITY_CONTAINER_SERVICE is the container pool's service"
    ]
