"""Lambda functions: one factory's settings on all five, event source mappings, environment."""

from __future__ import annotations

import pytest

from infra.bundling import LAMBDA_PYTHON_VERSION
from jobsched.runtime.resources import (
    ENV_CODE_VERSION,
    ENV_RETENTION_DAYS,
    ENV_TENANT_BURST,
    ENV_TENANT_MAX_RUNNING,
    ENV_TENANT_RUNS_PER_SECOND,
    FUNCTIONS,
    LAMBDA_QUEUE_KINDS,
    QUEUES,
    TABLES,
    FunctionSpec,
)


def _function(synth, spec: FunctionSpec) -> dict:
    return synth.template["Resources"][synth.logical_id(synth.stack.functions[spec.name])]["Properties"]


def test_one_lambda_function_per_spec_and_one_each_for_the_high_and_long_queues(synth):
    # Given the five specs, the worker's built three times (the shared, the high and the long worker),
    # and the capacity function (CAPACITY_FUNCTION, not a spec of FUNCTIONS: infra/capacity.py)
    synth.assertions.resource_count_is("AWS::Lambda::Function", len(FUNCTIONS) + 2 + 1)


@pytest.mark.parametrize("spec", FUNCTIONS, ids=lambda s: s.name)
def test_function_runs_on_arm64_and_a_current_python(synth, spec):
    props = _function(synth, spec)
    assert props["Architectures"] == ["arm64"]
    assert props["Runtime"] == f"python{LAMBDA_PYTHON_VERSION}"


@pytest.mark.parametrize("spec", FUNCTIONS, ids=lambda s: s.name)
def test_function_handler_memory_and_timeout_come_from_its_spec(synth, spec):
    props = _function(synth, spec)
    assert (props["Handler"], props["MemorySize"], props["Timeout"]) == (
        spec.handler,
        spec.memory_mb,
        spec.timeout_seconds,
    )


@pytest.mark.parametrize("spec", FUNCTIONS, ids=lambda s: s.name)
def test_function_logs_json_and_traces(synth, spec):
    props = _function(synth, spec)
    assert props["LoggingConfig"]["LogFormat"] == "JSON"
    assert props["TracingConfig"] == {"Mode": "Active"}


@pytest.mark.parametrize("spec", FUNCTIONS, ids=lambda s: s.name)
def test_function_environment_names_every_table_and_queue(synth, spec):
    # Given the shared settings object needs every name / Then every function gets all of them
    env = _function(synth, spec)["Environment"]["Variables"]
    expected = {t.env_var for t in TABLES} | {q.env_var for q in QUEUES} | {q.dlq_env_var for q in QUEUES}
    assert expected <= set(env)
    tables = synth.stack.tables
    for table in TABLES:
        assert env[table.env_var] == {"Ref": synth.logical_id(tables.table(table))}


def test_all_functions_share_one_code_asset(synth):
    # The asset_dir property asserts a single S3 key; the directory is the bundled asset
    assert synth.asset_dir.is_dir()


def test_each_function_writes_to_its_own_log_group_with_retention(synth):
    groups = synth.resources("AWS::Logs::LogGroup")
    for spec in FUNCTIONS:
        ref = _function(synth, spec)["LoggingConfig"]["LogGroup"]["Ref"]
        assert groups[ref]["Properties"]["RetentionInDays"] == 30


def _mappings(synth, function_name: str) -> list[dict]:
    fn = synth.logical_id(synth.stack.functions[function_name])
    return [
        m["Properties"]
        for m in synth.resources("AWS::Lambda::EventSourceMapping").values()
        if m["Properties"]["FunctionName"] == {"Ref": fn}
    ]


@pytest.mark.parametrize("spec", FUNCTIONS, ids=lambda s: s.name)
def test_function_environment_carries_the_one_retention_setting(synth, spec):
    # Given retention_days governs run items and bucket objects alike / Then every function reads
    # the value the bucket's lifecycle rule uses
    env = _function(synth, spec)["Environment"]["Variables"]
    assert env[ENV_RETENTION_DAYS] == str(synth.stack.config.retention_days)


@pytest.mark.parametrize("spec", FUNCTIONS, ids=lambda s: s.name)
def test_function_environment_carries_the_default_tenant_limits(synth, spec):
    # Given the deployment's per-tenant default limits / Then the worker (which enforces them) and
    # the api (GET /limits shows them) read the configured values
    env = _function(synth, spec)["Environment"]["Variables"]
    config = synth.stack.config
    assert env[ENV_TENANT_MAX_RUNNING] == str(config.tenant_max_running)
    assert env[ENV_TENANT_RUNS_PER_SECOND] == str(config.tenant_runs_per_second)
    assert env[ENV_TENANT_BURST] == str(config.tenant_burst)


def _by_queue(synth, function_name: str) -> dict[str, dict]:
    queues = synth.stack.queues
    kinds = {synth.logical_id(queues.queue(q.kind)): q.kind for q in QUEUES}
    return {kinds[m["EventSourceArn"]["Fn::GetAtt"][0]]: m for m in _mappings(synth, function_name)}


def test_the_high_and_long_queues_have_their_own_functions_and_the_others_share_the_worker(synth):
    # Given the four Lambda run queues / Then the high worker consumes high alone, the long worker long
    # alone, the worker default and low; no function consumes the container queue
    assert set(_by_queue(synth, "worker_high")) == {"high"}
    assert set(_by_queue(synth, "worker_long")) == {"long"}
    assert set(_by_queue(synth, "worker")) == {"default", "low"}


def test_each_queue_mapping_carries_its_maximum_concurrency(synth):
    # Given the configured MaximumConcurrency per queue / Then each mapping carries its queue's value
    config = synth.stack.config
    mappings = {
        **_by_queue(synth, "worker"),
        **_by_queue(synth, "worker_high"),
        **_by_queue(synth, "worker_long"),
    }
    assert set(mappings) == set(LAMBDA_QUEUE_KINDS)  # the container queue has no Lambda consumer
    for kind, mapping in mappings.items():
        assert mapping["ScalingConfig"] == {"MaximumConcurrency": config.mapping_ceiling(kind)}
        assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]


def test_the_high_worker_has_reserved_concurrency_and_the_worker_none(synth):
    # Given the default high_reserved_concurrency (the high mapping's ceiling: max_concurrency["high"]
    # 20 with the default fair share's head-room, ceil(20 / 0.8) = 25) / Then the high worker reserves
    # that many executions; the shared worker draws on the unreserved pool
    high, worker = _function_named(synth, "worker_high"), _function_named(synth, "worker")
    assert high["ReservedConcurrentExecutions"] == synth.stack.config.high_reservation == 25
    assert "ReservedConcurrentExecutions" not in worker


def test_the_long_worker_has_reserved_concurrency_of_its_own(synth):
    # Given the default long_reserved_concurrency (= max_concurrency["long"]) / Then the long worker
    # reserves that many executions: long work never takes short work's capacity, nor the reverse
    long = _function_named(synth, "worker_long")
    assert long["ReservedConcurrentExecutions"] == synth.stack.config.long_reservation == 5
    assert long["Timeout"] == 900


@pytest.mark.parametrize("name", ["worker_high", "worker_long"])
def test_the_high_and_long_workers_run_the_worker_code_and_write_to_its_log_group(synth, name):
    # Given one code asset / Then the high and long workers are the worker (handler, memory, timeout,
    # environment) and their logs go to the worker's group (the run view's Logs Insights query reads one)
    own, worker = _function_named(synth, name), _function_named(synth, "worker")
    for prop in ("Handler", "MemorySize", "Timeout", "Code", "Environment", "LoggingConfig"):
        assert own[prop] == worker[prop], prop


def _function_named(synth, name: str) -> dict:
    return synth.template["Resources"][synth.logical_id(synth.stack.functions[name])]["Properties"]


def test_long_queue_delivers_one_chunk_task_per_invocation(synth):
    long_queue = synth.logical_id(synth.stack.queues.queue("long"))
    (mapping,) = [
        m for m in _mappings(synth, "worker_long") if m["EventSourceArn"]["Fn::GetAtt"][0] == long_queue
    ]
    assert mapping["BatchSize"] == 1


def test_dlq_consumer_drains_every_dlq_and_reports_partial_failures(synth):
    queues = synth.stack.queues
    mappings = _mappings(synth, "dlq_consumer")
    assert {m["EventSourceArn"]["Fn::GetAtt"][0] for m in mappings} == {
        synth.logical_id(queues.dlq(q.kind)) for q in QUEUES
    }
    assert all(m["FunctionResponseTypes"] == ["ReportBatchItemFailures"] for m in mappings)


@pytest.mark.parametrize("spec", FUNCTIONS, ids=lambda s: s.name)
def test_function_environment_carries_the_code_version_of_the_asset(synth, spec):
    # Given the one code asset every function shares (decision 0048) / Then each function's code
    # version is the first 12 hex digits of that asset's hash, the name of its object in the bucket
    props = _function(synth, spec)
    asset_hash = props["Code"]["S3Key"].removesuffix(".zip")
    assert props["Environment"]["Variables"][ENV_CODE_VERSION] == asset_hash[:12]
    assert len(asset_hash) == 64 and all(c in "0123456789abcdef" for c in asset_hash)
