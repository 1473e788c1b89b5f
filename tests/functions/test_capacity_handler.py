"""functions/capacity.py: the capacity function built from its environment like in a deployment, on
moto: the worker mappings (a Lambda function and four SQS event source mappings in moto), the queues'
ages in the Leases table, one tick per invocation. Its calls are recorded for
tests/infra/test_permissions_by_use.py (the grants of infra/capacity.py are judged by them)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

import functions.capacity as capacity_function
from jobsched.aws.jobs_store import JobsStore
from jobsched.aws.limits_store import PoolCeilingItems, Semaphores, epoch_ms, share_key
from jobsched.aws.metering import dynamo_for
from jobsched.aws.queue_ages import QueueAges
from jobsched.aws.usage_store import UsageStore
from jobsched.compose.capacity import capacity_policy_from_env, worker_alias_from_env
from jobsched.core.clock import FakeClock
from jobsched.core.models import Job
from jobsched.core.shares import tenant_slots_at
from jobsched.core.usage import DEPLOYMENT
from jobsched.local.invoke import LambdaContext
from jobsched.runtime.resources import (
    ENV_CAPACITY_CONTAINER_SERVICE,
    ENV_CAPACITY_MAPPING_PREFIX,
    ENV_CAPACITY_MAX_PROVISIONED,
    ENV_CAPACITY_QUEUES,
    ENV_CAPACITY_WORKER_FUNCTION,
    ENV_FAIR_SHARE,
    ENV_TENANT_SLOTS,
    LAMBDA_QUEUE_KINDS,
    WORKER_ALIAS,
)
from tests.aws.conftest import aws, aws_environ  # noqa: F401 - the moto fixtures, exported as the environment
from tests.aws.moto_lambda import create_stub_function

NOW = datetime(2026, 12, 5, 9, 0, tzinfo=UTC)
#: What infra/capacity.py writes for -c capacity_max_concurrency='{"high": 30, "default": 100, "low": 40,
#: "long": 8}' -c high_reserved_concurrency=30 -c long_reserved_concurrency=8.
QUEUES = {
    "high": {"base": 20, "cap": 30, "batch_size": 10},
    "default": {"base": 20, "cap": 100, "batch_size": 10},
    "low": {"base": 5, "cap": 40, "batch_size": 10},
    "long": {"base": 5, "cap": 8, "batch_size": 1},
}


def _deploy_mappings(aws_environ, monkeypatch) -> dict[str, str]:  # noqa: F811
    """The worker mappings at their configured ceilings, their UUIDs in the function's environment."""
    clients = aws_environ.clients
    lam = create_stub_function(clients)
    uuids = {}
    for kind in LAMBDA_QUEUE_KINDS:
        url = aws_environ.settings.queue_url(kind)
        arn = clients.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        uuids[kind] = lam.create_event_source_mapping(
            EventSourceArn=arn,
            FunctionName="worker",
            BatchSize=QUEUES[kind]["batch_size"],
            ScalingConfig={"MaximumConcurrency": QUEUES[kind]["base"]},
        )["UUID"]
        monkeypatch.setenv(ENV_CAPACITY_MAPPING_PREFIX + kind.upper(), uuids[kind])
    return uuids


@pytest.fixture
def deployed(aws_environ, monkeypatch):  # noqa: F811
    """The worker mappings at their configured ceilings, their UUIDs in the function's environment."""
    uuids = _deploy_mappings(aws_environ, monkeypatch)
    monkeypatch.setenv(ENV_CAPACITY_QUEUES, json.dumps(QUEUES))
    with capacity_function.seam.installed(clock=FakeClock(NOW)):
        yield aws_environ, uuids


#: What infra/capacity.py adds with -c capacity_max_warm_tasks=4: the container queue, 0..4 tasks.
CONTAINER = {"base": 0, "cap": 4, "batch_size": 1}


@pytest.fixture
def with_containers(aws_environ, monkeypatch):  # noqa: F811
    """``deployed`` plus the container pool as the stack builds it: an ECS service whose scalable target
    (0..10 tasks, minimum ``0``) its step scaling drives, named in JOBSCHED_CAPACITY_CONTAINER_SERVICE."""
    uuids = _deploy_mappings(aws_environ, monkeypatch)
    ecs = aws_environ.clients.client("ecs")
    ecs.create_cluster(clusterName="pool")
    ecs.register_task_definition(
        family="worker", containerDefinitions=[{"name": "w", "image": "w", "memory": 512}]
    )
    ecs.create_service(cluster="pool", serviceName="container", taskDefinition="worker", desiredCount=0)
    aws_environ.clients.client("application-autoscaling").register_scalable_target(
        ServiceNamespace="ecs",
        ResourceId="service/pool/container",
        ScalableDimension="ecs:service:DesiredCount",
        MinCapacity=0,
        MaxCapacity=10,
    )
    monkeypatch.setenv(ENV_CAPACITY_QUEUES, json.dumps({**QUEUES, "container": CONTAINER}))
    monkeypatch.setenv(ENV_CAPACITY_CONTAINER_SERVICE, "pool/container")
    with capacity_function.seam.installed(clock=FakeClock(NOW)):
        yield aws_environ, uuids


def _minimum(env) -> int:
    (target,) = env.clients.client("application-autoscaling").describe_scalable_targets(
        ServiceNamespace="ecs", ResourceIds=["service/pool/container"]
    )["ScalableTargets"]
    assert target["MaxCapacity"] == 10  # never changed by the function
    return int(target["MinCapacity"])


def _ceilings(env, uuids) -> dict[str, int]:
    lam = env.clients.client("lambda")
    return {
        kind: lam.get_event_source_mapping(UUID=uuid)["ScalingConfig"]["MaximumConcurrency"]
        for kind, uuid in uuids.items()
    }


def _waiting_since(env, seconds: float) -> None:
    """The sweeper's measurement: every queue's oldest due run was due ``seconds`` before NOW."""
    dynamo = dynamo_for(env.settings, env.clients.dynamodb)
    due = NOW - timedelta(seconds=seconds)
    QueueAges(dynamo, env.settings.leases_table).record({kind: due for kind in LAMBDA_QUEUE_KINDS}, NOW)


def _burst(env, count: int, *, priority: str = "default", pool: str | None = None) -> None:
    """``count`` one-off jobs due at once at 09:05, five minutes ahead (the lead is ten)."""
    jobs = JobsStore(dynamo_for(env.settings, env.clients.dynamodb), env.settings.jobs_table)
    burst = NOW + timedelta(minutes=5)
    for i in range(count):
        jobs.create(
            Job(
                id=f"burst-{i:03d}",
                tenant="acme",
                name=f"burst-{i:03d}",
                schedule="at(2026-12-05T09:05:00)",
                target={"handler": "demo.echo"},
                priority=priority,
                pool=pool,
                next_due_at=burst,
                created_at=NOW - timedelta(hours=1),
                updated_at=NOW - timedelta(hours=1),
            )
        )


def test_an_idle_deployment_keeps_every_mapping_at_its_configured_ceiling(deployed):
    env, uuids = deployed
    # Given nothing due and nothing waiting, When the scheduled tick runs
    summary = capacity_function.handler({}, LambdaContext("capacity", 60))
    # Then no mapping is changed: each stays at its base
    assert summary["changed"] == {} and summary["refused"] == {}
    assert _ceilings(env, uuids) == {kind: q["base"] for kind, q in QUEUES.items()}


def test_runs_waiting_past_the_threshold_double_each_ceiling_up_to_its_cap(deployed):
    env, uuids = deployed
    # Given every queue's oldest due run waiting for 90 s (over the 60 s threshold)
    _waiting_since(env, 90)
    # When the scheduled tick runs
    summary = capacity_function.handler({}, LambdaContext("capacity", 60))
    # Then each mapping's MaximumConcurrency doubled, within its cap (high's and long's stop at theirs)
    expected = {"high": 30, "default": 40, "low": 10, "long": 8}
    assert _ceilings(env, uuids) == expected
    assert summary["ceilings"] == expected
    assert summary["changed"] == {"high": [20, 30], "default": [20, 40], "low": [5, 10], "long": [5, 8]}


def test_a_burst_due_within_the_lead_raises_its_queue_ahead_of_it(deployed):
    env, uuids = deployed
    # Given 600 low-priority runs due at once at 09:05, five minutes ahead (the lead is ten)
    _burst(env, 600, priority="low")
    # When the scheduled tick runs, nothing waiting yet
    summary = capacity_function.handler({}, LambdaContext("capacity", 60))
    # Then only the low mapping is raised, before the burst: 600 runs of 1 s to start within 5 s need
    # 120 at once (ForecastConfig's defaults), 12 invocations of a batch of 10
    assert summary["changed"] == {"low": [5, 12]}
    assert _ceilings(env, uuids) == {"high": 20, "default": 20, "low": 12, "long": 5}


def test_once_nothing_waits_the_ceilings_fall_back_to_their_base(deployed):
    env, uuids = deployed
    _waiting_since(env, 90)
    capacity_function.handler({}, LambdaContext("capacity", 60))
    # Given the queues drained (the sweeper found no old run)
    QueueAges(dynamo_for(env.settings, env.clients.dynamodb), env.settings.leases_table).record({}, NOW)
    # When the next tick runs
    capacity_function.handler({}, LambdaContext("capacity", 60))
    # Then every mapping is back at its configured ceiling
    assert _ceilings(env, uuids) == {kind: q["base"] for kind, q in QUEUES.items()}


def test_a_missing_mapping_variable_fails_the_build_naming_it(deployed, monkeypatch):
    monkeypatch.delenv(ENV_CAPACITY_MAPPING_PREFIX + "LOW")
    with (
        capacity_function.seam.installed(clock=FakeClock(NOW)),
        pytest.raises(ValueError, match="JOBSCHED_CAPACITY_MAPPING_LOW"),
    ):
        capacity_function.handler({}, LambdaContext("capacity", 60))


def test_a_malformed_policy_fails_the_build_naming_it(deployed, monkeypatch):
    monkeypatch.setenv(ENV_CAPACITY_QUEUES, '{"default": {"base": 20}}')
    with (
        capacity_function.seam.installed(clock=FakeClock(NOW)),
        pytest.raises(ValueError, match=ENV_CAPACITY_QUEUES),
    ):
        capacity_function.handler({}, LambdaContext("capacity", 60))


def test_container_runs_due_within_the_lead_raise_the_services_minimum_ahead_of_them(with_containers):
    env, uuids = with_containers
    # Given 3 container-pool runs due at 09:05 (300 s each: 3 tasks at once), nothing waiting
    _burst(env, 3, pool="container")
    # When the scheduled tick runs at 09:00
    summary = capacity_function.handler({}, LambdaContext("capacity", 60))
    # Then the scalable target's minimum is raised to 3 (within the cap of 4), the mappings left alone
    assert summary["changed"] == {"container": [0, 3]} and summary["refused"] == {}
    assert _minimum(env) == 3
    assert _ceilings(env, uuids) == {kind: q["base"] for kind, q in QUEUES.items()}


def test_a_burst_over_the_cap_raises_the_minimum_to_the_cap_only(with_containers):
    env, _ = with_containers
    _burst(env, 9, pool="container")
    summary = capacity_function.handler({}, LambdaContext("capacity", 60))
    assert summary["changed"] == {"container": [0, CONTAINER["cap"]]}
    assert _minimum(env) == CONTAINER["cap"]


def test_once_no_peak_is_near_the_minimum_falls_back_to_zero(with_containers):
    env, _ = with_containers
    # Given the minimum raised for a peak that has passed (nothing due, nothing waiting)
    env.clients.client("application-autoscaling").register_scalable_target(
        ServiceNamespace="ecs",
        ResourceId="service/pool/container",
        ScalableDimension="ecs:service:DesiredCount",
        MinCapacity=4,
    )
    # When the scheduled tick runs
    summary = capacity_function.handler({}, LambdaContext("capacity", 60))
    # Then the minimum is back at 0: scale-in is left to the service's own idle policy
    assert summary["changed"] == {"container": [4, 0]}
    assert _minimum(env) == 0


def test_a_malformed_container_service_fails_the_build_naming_it(with_containers, monkeypatch):
    monkeypatch.setenv(ENV_CAPACITY_CONTAINER_SERVICE, "pool-without-service")
    with (
        capacity_function.seam.installed(clock=FakeClock(NOW)),
        pytest.raises(ValueError, match=ENV_CAPACITY_CONTAINER_SERVICE),
    ):
        capacity_function.handler({}, LambdaContext("capacity", 60))


def _env(**extra: str) -> dict[str, str]:
    """The variables infra/capacity.py writes (mapping UUIDs made up: nothing is called)."""
    env = {ENV_CAPACITY_QUEUES: json.dumps(QUEUES), **extra}
    env.update({ENV_CAPACITY_MAPPING_PREFIX + kind.upper(): f"uuid-{kind}" for kind in LAMBDA_QUEUE_KINDS})
    return env


def test_a_provisioned_cap_names_the_workers_alias_live():
    # Given what infra/capacity.py writes with -c capacity_max_provisioned=25
    env = _env(**{ENV_CAPACITY_MAX_PROVISIONED: "25", ENV_CAPACITY_WORKER_FUNCTION: "Jobsched-Worker-1A2B"})
    policy, _ = capacity_policy_from_env(env)
    # Then the plan may provision up to 25, on the alias live of that function
    assert policy.provisioned_cap == 25
    assert worker_alias_from_env(env, policy) == ("Jobsched-Worker-1A2B", WORKER_ALIAS)
    # And without the cap (the default deployment) nothing is provisioned and no alias is used
    default, _ = capacity_policy_from_env(_env())
    assert default.provisioned_cap == 0 and worker_alias_from_env(_env(), default) is None


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ({ENV_CAPACITY_MAX_PROVISIONED: "25"}, ENV_CAPACITY_WORKER_FUNCTION),
        (
            {ENV_CAPACITY_MAX_PROVISIONED: "-3", ENV_CAPACITY_WORKER_FUNCTION: "w"},
            ENV_CAPACITY_MAX_PROVISIONED,
        ),
        (
            {ENV_CAPACITY_MAX_PROVISIONED: "some", ENV_CAPACITY_WORKER_FUNCTION: "w"},
            ENV_CAPACITY_MAX_PROVISIONED,
        ),
    ],
)
def test_a_bad_provisioned_setting_fails_the_build_naming_the_variable(deployed, monkeypatch, extra, named):
    for var, value in extra.items():
        monkeypatch.setenv(var, value)
    with (
        capacity_function.seam.installed(clock=FakeClock(NOW)),
        pytest.raises(ValueError, match=named),
    ):
        capacity_function.handler({}, LambdaContext("capacity", 60))


def test_a_tick_is_counted_on_the_deployment_row_not_on_a_tenants(deployed):
    env, _ = deployed
    # Given acme's jobs due within the lead (the tick reads them: items that carry a tenant)
    _burst(env, 3)
    # When the scheduled tick runs
    capacity_function.handler({}, LambdaContext("capacity", 60))
    # Then its requests and its one invocation are the deployment row's, and acme is counted nothing
    store = UsageStore(dynamo_for(env.settings, env.clients.dynamodb), env.settings.leases_table)
    day = NOW.date()
    [row] = store.tenant_days(DEPLOYMENT, day, day)
    assert row.rru > 0 and row.lambda_requests == 1 and row.lambda_gb_seconds > 0
    assert store.tenant_days("acme", day, day) == []


@pytest.fixture
def shared(aws_environ, monkeypatch):  # noqa: F811
    """``deployed`` with the fair share on: the variables infra/stack.py gives every function."""
    uuids = _deploy_mappings(aws_environ, monkeypatch)
    monkeypatch.setenv(ENV_CAPACITY_QUEUES, json.dumps(QUEUES))
    monkeypatch.setenv(ENV_TENANT_SLOTS, "default=20,high=20,low=5")
    monkeypatch.setenv(ENV_FAIR_SHARE, "0.8")
    with capacity_function.seam.installed(clock=FakeClock(NOW)):
        yield aws_environ, uuids


def test_with_the_fair_share_a_raised_ceiling_is_written_where_the_workers_read_it(shared):
    env, _ = shared
    # Given every queue's oldest due run waiting for 90 s
    _waiting_since(env, 90)
    # When the scheduled tick runs
    capacity_function.handler({}, LambdaContext("capacity", 60))
    # Then each shared queue's raised ceiling is in the Leases table (pool#<queue>), in force 300 s;
    # long has no share and no item
    items = PoolCeilingItems(dynamo_for(env.settings, env.clients.dynamodb), env.settings.leases_table)
    for kind, ceiling in (("high", 30), ("default", 40), ("low", 10)):
        written = items.read(kind)
        assert written is not None and written.ceiling == ceiling, kind
        assert written.set_at_ms == epoch_ms(NOW) and written.until_ms == epoch_ms(NOW) + 300_000
    assert items.read("long") is None
    # And a worker of that deployment lets one tenant hold floor(40 x 0.8) = 32 of default's
    holders, pool = Semaphores(
        dynamo_for(env.settings, env.clients.dynamodb), env.settings.leases_table
    ).look(share_key("default", "acme"), "default")
    assert holders == {} and pool is not None
    assert tenant_slots_at(20, 0.8, pool.in_force(epoch_ms(NOW))) == 32
