"""The pool capacity port (decision 0055) on the fake and on moto: a mapping's ceiling is its
``ScalingConfig.MaximumConcurrency`` and a value outside 2..1000 is refused; the container pool's is the
ECS service's desired count. Provisioned concurrency: moto 5 has no provisioned-concurrency calls, so
that part runs on the fake only (its semantics: n >= 1 asked, 0 deletes)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from moto import mock_aws

from jobsched.aws.capacity import AwsCapacity
from jobsched.aws.clients import Clients
from jobsched.ports.capacity import CapacityRefused, PoolCapacity
from jobsched.testing.capacity import InMemoryCapacity
from tests.aws.conftest import REGION, _fake_credentials
from tests.aws.moto_lambda import create_stub_function


def _moto_capacity() -> AwsCapacity:
    clients = Clients(region_name=REGION)
    lam = create_stub_function(clients)
    queue = clients.client("sqs").create_queue(QueueName="default")["QueueUrl"]
    arn = clients.client("sqs").get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])[
        "Attributes"
    ]["QueueArn"]
    uuid = lam.create_event_source_mapping(
        EventSourceArn=arn, FunctionName="worker", ScalingConfig={"MaximumConcurrency": 10}
    )["UUID"]
    ecs = clients.client("ecs")
    ecs.create_cluster(clusterName="pool")
    ecs.register_task_definition(
        family="worker", containerDefinitions=[{"name": "w", "image": "w", "memory": 512}]
    )
    ecs.create_service(cluster="pool", serviceName="container", taskDefinition="worker", desiredCount=0)
    return AwsCapacity(lam, ecs, {"default": uuid}, service=("pool", "container"))


@pytest.fixture(params=["memory", "moto"])
def capacity(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[PoolCapacity]:
    if request.param == "memory":
        yield InMemoryCapacity({"default": 10, "container": 0})
        return
    _fake_credentials(monkeypatch)
    with mock_aws():
        yield _moto_capacity()


def test_the_ceilings_read_what_was_set(capacity):
    assert set(capacity.kinds()) == {"default", "container"}
    assert (capacity.ceiling("default"), capacity.ceiling("container")) == (10, 0)
    capacity.set_ceiling("default", 250)
    capacity.set_ceiling("container", 3)
    assert (capacity.ceiling("default"), capacity.ceiling("container")) == (250, 3)


@pytest.mark.parametrize("value", [1, 1001])
def test_a_mapping_ceiling_outside_lambdas_range_is_refused_and_changes_nothing(capacity, value):
    # Lambda's range is 2..1000 ("Valid Range: Minimum value of 2. Maximum value of 1000"); moto stores
    # any value, so the adapter checks the range before the call, as the fake does
    with pytest.raises(CapacityRefused):
        capacity.set_ceiling("default", value)
    assert capacity.ceiling("default") == 10


def test_a_kind_the_deployment_does_not_wire_reads_none(capacity):
    assert capacity.ceiling("long") is None
    with pytest.raises(KeyError):
        capacity.set_ceiling("long", 5)


def test_provisioned_concurrency_is_asked_and_deleted_on_the_fake():
    fake = InMemoryCapacity({"default": 10})
    fake.set_provisioned(120)
    assert fake.provisioned() == 120
    fake.set_provisioned(0)
    assert fake.provisioned() == 0 and fake.changes == [("provisioned", 120), ("provisioned", 0)]
    with pytest.raises(CapacityRefused):
        fake.set_provisioned(-1)


def _moto_scalable_target(clients: Clients, maximum: int = 10) -> AwsCapacity:
    """The container pool as the CDK stack builds it: an ECS service whose desired count a scalable
    target (0..``maximum``) governs; the adapter sets the target's minimum."""
    ecs = clients.client("ecs")
    ecs.create_cluster(clusterName="pool")
    ecs.register_task_definition(
        family="worker", containerDefinitions=[{"name": "w", "image": "w", "memory": 512}]
    )
    ecs.create_service(cluster="pool", serviceName="container", taskDefinition="worker", desiredCount=0)
    scaling = clients.client("application-autoscaling")
    scaling.register_scalable_target(
        ServiceNamespace="ecs",
        ResourceId="service/pool/container",
        ScalableDimension="ecs:service:DesiredCount",
        MinCapacity=0,
        MaxCapacity=maximum,
    )
    return AwsCapacity(
        clients.client("lambda"), None, {}, service=("pool", "container"), autoscaling_client=scaling
    )


def _target(clients: Clients) -> dict:
    (target,) = clients.client("application-autoscaling").describe_scalable_targets(
        ServiceNamespace="ecs", ResourceIds=["service/pool/container"]
    )["ScalableTargets"]
    return target


def test_with_a_scalable_target_the_container_ceiling_is_its_minimum_and_the_maximum_is_kept(monkeypatch):
    _fake_credentials(monkeypatch)
    with mock_aws():
        clients = Clients(region_name=REGION)
        capacity = _moto_scalable_target(clients)
        # Given the stack's target (0..10), Then the container kind reads its minimum, 0
        assert capacity.kinds() == ("container",)
        assert capacity.ceiling("container") == 0
        # When the minimum is raised ahead of a peak, and lowered after
        capacity.set_ceiling("container", 4)
        assert capacity.ceiling("container") == 4
        assert (_target(clients)["MinCapacity"], _target(clients)["MaxCapacity"]) == (4, 10)
        capacity.set_ceiling("container", 0)
        # Then only the minimum changed, and the service's desired count is left to the scaling
        assert (_target(clients)["MinCapacity"], _target(clients)["MaxCapacity"]) == (0, 10)
        service = clients.client("ecs").describe_services(cluster="pool", services=["container"])
        assert service["services"][0]["desiredCount"] == 0


@pytest.mark.parametrize("value", [-1, 11])
def test_a_minimum_outside_the_targets_range_is_refused_and_changes_nothing(monkeypatch, value):
    _fake_credentials(monkeypatch)
    with mock_aws():
        clients = Clients(region_name=REGION)
        capacity = _moto_scalable_target(clients, maximum=10)
        # Application Auto Scaling refuses a minimum above the maximum; moto does not, so the adapter
        # checks it (and a negative one) before the call
        with pytest.raises(CapacityRefused):
            capacity.set_ceiling("container", value)
        assert capacity.ceiling("container") == 0


def test_a_service_without_a_scalable_target_reads_none_and_is_refused(monkeypatch):
    _fake_credentials(monkeypatch)
    with mock_aws():
        clients = Clients(region_name=REGION)
        scaling = clients.client("application-autoscaling")
        capacity = AwsCapacity(
            clients.client("lambda"), None, {}, service=("pool", "absent"), autoscaling_client=scaling
        )
        assert capacity.ceiling("container") is None
        with pytest.raises(CapacityRefused, match="no scalable target"):
            capacity.set_ceiling("container", 2)
        # And nothing was registered in its place
        assert scaling.describe_scalable_targets(ServiceNamespace="ecs")["ScalableTargets"] == []
