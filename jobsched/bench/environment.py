"""The benchmark's AWS: moto in-process, every resource provisioned, and SQS on the simulated clock.

Why SQS follows the fake clock: the dispatcher enqueues runs ahead of their due instant with
``DelaySeconds`` (look-ahead and enqueue horizon, as deployed), and moto holds a delayed message in
real time. The benchmark simulates minutes in milliseconds, so while it runs, moto's SQS model reads
the benchmark clock instead of the wall clock (``moto.sqs.models.unix_time`` and
``unix_time_millis``, the only time sources of that module). Delays, visibility timeouts and
retention then behave exactly as they would over the simulated minutes. Nothing else is patched.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any
from unittest import mock

import boto3
from moto import mock_aws

from jobsched.core.clock import Clock
from jobsched.core.shares import DEFAULT_FAIR_SHARE, format_tenant_slots
from jobsched.local import moto_fixes
from jobsched.local.provision import Provisioned, provision
from jobsched.runtime import resources

REGION = "us-east-1"
#: Variables that would change the deployment defaults the benchmark is meant to measure.
_CLEARED = (
    "AWS_ENDPOINT_URL",
    "AWS_PROFILE",
    resources.ENV_LOOKAHEAD_SECONDS,
    resources.ENV_ENQUEUE_HORIZON_SECONDS,
)


#: The deployment's default slots one tenant may hold per queue (infra/config.py's ``tenant_slots()``
#: at the default fair share, decision 0057; tests/infra/test_fair_share.py checks they agree), so the
#: cost benchmark's worker pays what a deployed one does for the share: the look at the tenant's share
#: item and the pool's ceiling item, one BatchGetItem per invocation.
DEFAULT_TENANT_SLOTS: dict[str, int] = {"default": 20, "high": 20, "low": 5}


def _function_environment(shards: int) -> dict[str, str]:
    slots = (
        {
            resources.ENV_TENANT_SLOTS: format_tenant_slots(DEFAULT_TENANT_SLOTS),
            resources.ENV_FAIR_SHARE: str(DEFAULT_FAIR_SHARE),
        }
        if DEFAULT_TENANT_SLOTS
        else {}
    )
    return {
        **slots,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": REGION,
        "AWS_REGION": REGION,
        resources.ENV_SHARDS: str(shards),
        resources.ENV_AUTH_MODE: "token",
        "POWERTOOLS_SERVICE_NAME": "jobsched",
        "POWERTOOLS_METRICS_NAMESPACE": "jobsched",
        "POWERTOOLS_METRICS_DISABLED": "true",
        "POWERTOOLS_LOG_LEVEL": "WARNING",
        "POWERTOOLS_TRACE_DISABLED": "true",
    }


@contextmanager
def sqs_on_clock(clock: Clock) -> Iterator[None]:
    """While active, moto's SQS model takes "now" from ``clock`` (see the module docstring)."""
    from moto.sqs import models

    original = models.unix_time

    def unix_time(dt: datetime | None = None) -> float:
        if dt is not None:
            return original(dt)
        return clock.now().astimezone(UTC).timestamp()

    with (
        mock.patch.object(models, "unix_time", unix_time),
        mock.patch.object(models, "unix_time_millis", lambda dt=None: unix_time(dt) * 1000.0),
    ):
        yield


@contextmanager
def bench_environment(shards: int, clock: Clock) -> Iterator[tuple[dict[str, Any], Provisioned]]:
    """moto with SQS on ``clock``, fake credentials, every resource provisioned from
    :mod:`jobsched.runtime.resources` (the embedded mode's provisioning) and the function environment exported
    with the deployment defaults. The process environment is restored on exit."""
    moto_fixes.apply()  # the worker's threads share moto in-process: its item operations one at a time
    with mock.patch.dict(os.environ, _function_environment(shards)):
        for name in _CLEARED:
            os.environ.pop(name, None)
        with mock_aws(), sqs_on_clock(clock):
            session = boto3.session.Session(region_name=REGION)
            clients = {name: session.client(name) for name in ("dynamodb", "sqs", "s3", "stepfunctions")}
            provisioned = provision(
                prefix="bench",
                visibility_timeout_seconds=60,
                **clients,
            )
            os.environ.update(provisioned.environment())
            yield clients, provisioned
