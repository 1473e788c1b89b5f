"""The pool vocabulary and the one queue choice (jobsched/core/pools.py, decision 0053)."""

from __future__ import annotations

import json

import pytest

from jobsched.core import pools
from jobsched.core.errors import ValidationError
from jobsched.core.messages import RunMessage
from jobsched.runtime import resources as r
from jobsched.runtime.settings import ConfigurationError, Settings
from jobsched.testing import memory_settings
from tests.aws.conftest import T0


def test_the_core_vocabulary_is_the_resources_one():
    # Given the pools the core routes by and the ones infra/ and the local mode provision for
    # Then they are the same names and limits, and every pool's queue is a provisioned queue kind
    assert pools.POOLS == r.POOLS
    assert pools.LAMBDA_TIME_LIMIT_SECONDS == r.LAMBDA_TIME_LIMIT_SECONDS
    assert pools.MAX_CONTAINER_TIMEOUT_SECONDS == r.MAX_CONTAINER_TIMEOUT_SECONDS
    assert pools.CONTAINER_QUEUE == r.CONTAINER_KIND
    kinds = {pools.queue_for(pool, priority) for pool in pools.POOLS for priority in r.PRIORITIES}
    assert kinds == set(r.QUEUE_KINDS)


@pytest.mark.parametrize(
    ("pool", "priority", "queue"),
    [
        ("lambda", "high", "high"),
        ("lambda", "default", "default"),
        ("lambda", "low", "low"),
        (None, "low", "low"),  # a run or message from before pools
        ("long", "high", "long"),
        ("long", "low", "long"),
        ("container", "high", "container"),
        ("container", "default", "container"),
    ],
)
def test_queue_for_picks_the_priority_queue_on_lambda_and_the_pools_own_queue_otherwise(
    pool, priority, queue
):
    assert pools.queue_for(pool, priority) == queue


def test_queue_for_an_unknown_pool_is_an_error_not_a_default():
    with pytest.raises(ValueError, match="unknown pool 'fargate'"):
        pools.queue_for("fargate", "default")


@pytest.mark.parametrize(
    ("pool", "queue"), [("long", "long"), ("container", "container"), (None, "long"), ("lambda", "long")]
)
def test_a_chunked_runs_tasks_go_to_the_container_queue_only_on_the_container_pool(pool, queue):
    assert pools.chunk_queue_for(pool) == queue


@pytest.mark.parametrize(
    ("timeout", "limit", "chunked", "pool"),
    [
        (300, 900, False, "lambda"),
        (900, 900, False, "lambda"),
        (901, 900, False, "container"),
        (10, 5, False, "container"),
        (5, 5, False, "lambda"),
        (10, 900, True, "long"),
        (3600, 900, True, "long"),
        ("x", 900, False, "lambda"),  # left for the timeout check to refuse
    ],
)
def test_default_pool(timeout, limit, chunked, pool):
    assert pools.default_pool(timeout, limit, chunked=chunked) == pool


def test_a_message_without_a_pool_is_a_lambda_message_and_an_unknown_pool_is_poison():
    msg = RunMessage(
        run_id="j.20260302T120000.000Z",
        job_id="j",
        tenant="t",
        attempt=1,
        scheduled_at=T0,
        due_at=T0,
        target={},
    )
    body = msg.to_dict()
    assert body["pool"] == "lambda"
    del body["pool"]
    assert RunMessage.from_json(json.dumps(body)).pool == "lambda"
    container = RunMessage.from_json(json.dumps({**body, "pool": "container"}))
    assert container.pool == "container" and json.loads(container.to_json())["pool"] == "container"
    with pytest.raises(ValidationError, match="pool must be one of lambda, long, container"):
        RunMessage.from_json(json.dumps({**body, "pool": "fargate"}))


def test_the_lambda_time_limit_setting_defaults_to_900_and_may_only_be_lowered():
    env = memory_settings().to_env()
    assert Settings.from_env(env).lambda_time_limit_seconds == 900
    assert Settings.from_env({**env, r.ENV_LAMBDA_TIME_LIMIT: "5"}).lambda_time_limit_seconds == 5
    lowered = Settings.from_env({**env, r.ENV_LAMBDA_TIME_LIMIT: "5"})
    assert Settings.from_env(lowered.to_env()).lambda_time_limit_seconds == 5
    with pytest.raises(ConfigurationError, match="must be <= 900"):
        Settings.from_env({**env, r.ENV_LAMBDA_TIME_LIMIT: "901"})
    with pytest.raises(ConfigurationError, match=r.ENV_LAMBDA_TIME_LIMIT):
        Settings.from_env({**env, r.ENV_LAMBDA_TIME_LIMIT: "0"})
