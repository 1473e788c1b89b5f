"""The in-memory twin of conftest's ``aws`` and ``pipeline`` fixtures: the same settings shape, the
fakes of jobsched.testing in place of moto. A test file moved onto the fakes imports them by name,
which overrides conftest's fixtures for that file only::

    from tests.aws.memory import memory_aws, memory_pipeline  # noqa: F401  (on the in-memory fakes)

(the fixtures are named ``aws`` and ``pipeline``, as conftest's).

Moto stays where AWS behaviour itself is under test (the adapters, capacity and cost figures, the
contract suite, the embedded end-to-end tests, the benchmarks).
"""

from __future__ import annotations

import json

import pytest

from jobsched.core.clock import FakeClock
from jobsched.testing import in_memory_aws, memory_settings
from jobsched.testing.wire import InMemoryDynamoClient
from tests.aws.conftest import PREFIX, AwsEnv, Pipeline
from tests.aws.conftest import build_pipeline as build_moto_pipeline


def memory_env(clock: FakeClock, **settings: object) -> AwsEnv:
    """The deployment conftest's ``provision`` makes on moto, in memory, run by ``clock``."""
    fields = {"lookahead_seconds": 60, "enqueue_horizon_seconds": 60, **settings}  # as provision()
    fakes = in_memory_aws(memory_settings(PREFIX, **fields), clock=clock)
    return AwsEnv(settings=fakes.settings, clients=fakes.clients)  # type: ignore[arg-type]


class MemoryPipeline(Pipeline):
    def messages(self, kind: str = "default") -> list[dict]:
        """Every message on a queue, delayed or not, as ``{"body", "group", "delay"}`` (oldest first)."""
        queue = self.env.clients.sqs.peek(self.env.settings.queue_url(kind))
        return [{"body": json.loads(m["body"]), "group": m["group"], "delay": m["delay"]} for m in queue]


@pytest.fixture(name="aws")
def memory_aws(clock: FakeClock) -> AwsEnv:
    """conftest's ``aws``, on the in-memory fakes (their clock is the test's ``clock``)."""
    return memory_env(clock)


@pytest.fixture(name="aws")
def memory_aws_units(clock: FakeClock) -> AwsEnv:
    """``memory_aws`` whose tables are reached as a DynamoDB client (:class:`InMemoryDynamoClient`):
    the stores then run on the metering adapter, which estimates write and read units as over moto
    (tests/contract/test_capacity.py). For tests that assert capacity units or cost."""
    env = memory_env(clock)
    env.clients.dynamodb = InMemoryDynamoClient(env.clients.dynamodb)  # type: ignore[assignment]
    return env


def build_pipeline(env: AwsEnv, owner: str = "test-dispatcher") -> Pipeline:
    """conftest's ``build_pipeline`` over the fakes (its ``messages`` read the fake queue)."""
    built = build_moto_pipeline(env, owner)
    return MemoryPipeline(env=built.env, jobs=built.jobs, dispatcher=built.dispatcher, meter=built.meter)


@pytest.fixture(name="pipeline")
def memory_pipeline(aws: AwsEnv) -> Pipeline:
    return build_pipeline(aws)
