"""boto3 clients, built lazily from one session.

No endpoint is ever passed by hand: boto3 itself honours ``AWS_ENDPOINT_URL`` (and the per-service
``AWS_ENDPOINT_URL_<SERVICE>``), which is how the local mode points everything at the emulator. Clients
are created on first use, never at import time, so a module import in a test or a cold start costs
nothing and tests can enter ``mock_aws()`` before any client exists.

"First use" is the first call, not the wiring: every client but DynamoDB's (which every function
calls at once) is handed out as a :class:`ClientOnFirstUse` that creates the boto3 client when its
first attribute is read. A worker wires S3 (large outputs), Step Functions (chunked jobs) and SNS
(dead-letter notifications) but most containers never call them; creating their clients, loading
each service's model and endpoint rules, was about a tenth of a worker's time to its first call
(docs/performance.md, "Lambda asset and cold start").
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import cached_property
from typing import Any

import boto3
from botocore.config import Config

from jobsched.runtime.resources import LANE_HEADER  # only when a lane source is set

#: Short timeouts and standard retries: a Lambda should fail over to its own retry rather than hang.
DEFAULT_CONFIG = Config(
    retries={"mode": "standard", "max_attempts": 4},
    connect_timeout=3,
    read_timeout=10,
    max_pool_connections=25,
)


_lane_source: Callable[[], str] | None = None


def set_lane_source(source: Callable[[], str] | None) -> None:
    """Tag every DynamoDB request of this process with ``LANE_HEADER`` = ``source()`` (the tenant it is
    made for). The embedded mode sets it, so that its emulated DynamoDB handles only a few requests of
    one tenant at once (:mod:`jobsched.local.moto_fixes.lanes`); on AWS nothing sets it and no header
    is added."""
    global _lane_source
    _lane_source = source


def _tag_lane(request: Any, **_: Any) -> None:
    source = _lane_source
    if source is not None:
        request.headers[LANE_HEADER] = source()


class ClientOnFirstUse:
    """Stands in for a boto3 client and creates it, once, when one of its attributes is first read
    (an API call, ``.meta``, ``.exceptions``); from then on every attribute is the client's own."""

    __slots__ = ("__weakref__", "_client", "_lock", "_make", "service")

    def __init__(self, service: str, make: Callable[[], Any]):
        self.service = service
        self._make = make
        self._client: Any = None
        self._lock = threading.Lock()

    @property
    def created(self) -> bool:
        """Whether the real client exists yet."""
        return self._client is not None

    def client(self) -> Any:
        """The boto3 client (created now if it was not)."""
        if self._client is None:
            with self._lock:
                if self._client is None:
                    self._client = self._make()
        return self._client

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client(), name)

    def __repr__(self) -> str:
        state = "created" if self.created else "not created yet"
        return f"<{self.service} client, {state}>"


class Clients:
    """The AWS clients one function needs, each created once on first access."""

    def __init__(
        self,
        session: boto3.Session | None = None,
        region_name: str | None = None,
        config: Config | None = None,
    ):
        self._session = session
        self._region = region_name
        self._config = config or DEFAULT_CONFIG

    @cached_property
    def session(self) -> boto3.Session:
        return self._session or boto3.Session(region_name=self._region)

    def client(self, service: str) -> Any:
        return self.session.client(
            service, region_name=self._region or self.session.region_name, config=self._config
        )

    @cached_property
    def dynamodb(self) -> Any:
        client = self.client("dynamodb")
        client.meta.events.register("before-sign.dynamodb", _tag_lane)
        return client

    def on_first_use(self, service: str) -> ClientOnFirstUse:
        """``service``'s client, created when first used (see the module docstring)."""
        return ClientOnFirstUse(service, lambda: self.client(service))

    @cached_property
    def sqs(self) -> Any:
        return self.on_first_use("sqs")

    @cached_property
    def s3(self) -> Any:
        return self.on_first_use("s3")

    @cached_property
    def stepfunctions(self) -> Any:
        return self.on_first_use("stepfunctions")

    @cached_property
    def sns(self) -> Any:
        return self.on_first_use("sns")

    @cached_property
    def cloudwatch(self) -> Any:
        return self.on_first_use("cloudwatch")
