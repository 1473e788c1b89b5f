"""The contract suite: every port's fake (jobsched.testing) and its AWS adapter over moto answer the
same calls the same way. Each test runs twice, ``[memory]`` and ``[moto]``; a difference fails one.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from moto import mock_aws

from jobsched.aws.clients import Clients
from jobsched.aws.metering import Dynamo, table_specs
from jobsched.core.clock import FakeClock
from jobsched.runtime.settings import Settings
from jobsched.testing import InMemoryObjects, InMemoryQueues, InMemoryTables
from tests.aws.conftest import REGION, T0, _fake_credentials, provision


@dataclass
class Backend:
    kind: str  # "memory" | "moto"
    settings: Settings
    table: Any  # a jobsched.ports.tables.Table
    sqs: Any  # a jobsched.ports.queues.SqsApi
    clock: FakeClock
    s3: Any = None  # a jobsched.ports.objects.ObjectApi


@pytest.fixture(params=["memory", "moto"])
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[Backend]:
    clock = FakeClock(T0)
    if request.param == "memory":
        from jobsched.testing import memory_settings

        settings = memory_settings()
        queues = InMemoryQueues.for_settings(settings, clock=clock)
        tables = InMemoryTables(table_specs(settings), clock=clock)
        yield Backend("memory", settings, tables, queues, clock, InMemoryObjects(settings.bucket))
        return
    _fake_credentials(monkeypatch)
    # moto's SQS reads the time through these two functions: they follow the test's clock here, so a
    # delay or a visibility timeout passes on moto when the clock moves, as it does on the fake.
    import moto.sqs.models as sqs_models

    def millis(dt: Any = None) -> float:
        return (dt or clock.now()).timestamp() * 1000

    monkeypatch.setattr(sqs_models, "unix_time_millis", millis)
    monkeypatch.setattr(sqs_models, "unix_time", lambda dt=None: millis(dt) / 1000)
    with mock_aws():
        clients = Clients(region_name=REGION)
        settings = provision(clients)
        table = Dynamo(clients.dynamodb, table_specs(settings))
        yield Backend("moto", settings, table, clients.sqs, clock, clients.s3)
