"""Faults injected at the AWS call boundary, through botocore's event hooks.

The fault battery installs :class:`FaultyClients` in the functions' seams
(:mod:`jobsched.compose.seam`): every boto3 client they create gets two handlers, registered first on
its event system:

* ``before-parameter-build.<service>`` keeps the call's parameters (the keyword arguments the code
  passed), per thread;
* ``before-call.<service>`` asks the :class:`FaultPlan` whether this call, made by this function, is to
  fail now, and how (:class:`Kind`).

A fault that happens *after the write reached the service* (``RESET_AFTER_WRITE``,
``LOST_RESPONSE``, ``KILL_AFTER``) makes the call for real first, through a client of its own that
has no hooks (the service applies it), then: replays the call as botocore's retry of a reset
connection would (the caller sees the retry's answer: for a conditional write, usually
``ConditionalCheckFailedException``); raises a read timeout (the caller does not know it was applied);
or raises :class:`Killed`, the process dying right after the call. The others never reach the
service: a throttling error, a 5xx, a connect timeout, or :class:`Killed` before the call.

:class:`Killed` derives from ``BaseException``: no ``except Exception`` in our code swallows it, so it
unwinds the whole invocation as a crash would, and the benchmark harness treats that invocation as
dead (its messages are not acknowledged).

Nothing here changes the code under test; the hooks sit where the network would be.
"""

from __future__ import annotations

import random
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import boto3
from botocore.exceptions import ClientError, ConnectTimeoutError, ReadTimeoutError

from jobsched.aws.clients import Clients


class Killed(BaseException):
    """The process died here (injected). Not an ``Exception``: nothing in the code under test catches it."""


class Kind(StrEnum):
    THROTTLE = "throttle"  # 400 ProvisionedThroughputExceeded / Throttling, not applied
    SERVER_ERROR = "server_error"  # 500 InternalServerError, not applied
    CONNECT_TIMEOUT = "connect_timeout"  # the request never left, not applied
    RESET_AFTER_WRITE = "reset_after_write"  # applied, connection reset, botocore's retry sent again
    LOST_RESPONSE = "lost_response"  # applied, then a read timeout: the caller does not know
    KILL_BEFORE = "kill_before"  # the process dies just before the call
    KILL_AFTER = "kill_after"  # the call is applied, then the process dies
    PARTIAL_BATCH = "partial_batch"  # SQS SendMessageBatch: only the first half of the entries is sent


_THROTTLE_CODE = {"dynamodb": "ProvisionedThroughputExceededException"}
WRITES = {
    "dynamodb": {"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"},
    "sqs": {"SendMessage", "SendMessageBatch", "DeleteMessage", "DeleteMessageBatch"},
    "s3": {"PutObject"},
}


@dataclass
class Rule:
    """Fail calls of ``service`` (``operations``, or every write of it) made by ``function`` (or any)."""

    kind: Kind
    service: str
    operations: frozenset[str] | None = None  # None: every write operation of the service
    function: str | None = None  # "dispatcher", "worker", "sweeper" or None for any
    probability: float = 1.0
    match: Callable[[dict[str, Any]], bool] | None = None  # on the call's parameters
    limit: int | None = None  # at most this many injections

    def applies(self, service: str, operation: str, function: str | None, params: dict[str, Any]) -> bool:
        if service != self.service or (self.function is not None and function != self.function):
            return False
        ops = self.operations if self.operations is not None else WRITES.get(service, frozenset())
        return operation in ops and (self.match is None or self.match(params))


@dataclass
class FaultPlan:
    """The rules in force, switched on and off by the scenario; counts what it injected."""

    rules: list[Rule] = field(default_factory=list)
    seed: int = 7
    active: bool = False
    current_function: Callable[[], str | None] = lambda: None
    injected: Counter[str] = field(default_factory=Counter)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)
        self._lock = threading.Lock()

    def choose(self, service: str, operation: str, params: dict[str, Any]) -> Rule | None:
        if not self.active:
            return None
        function = self.current_function()
        with self._lock:
            for rule in self.rules:
                if not rule.applies(service, operation, function, params):
                    continue
                key = f"{rule.kind}:{service}.{operation}"
                if (
                    rule.limit is not None
                    and sum(n for k, n in self.injected.items() if k.startswith(f"{rule.kind}:"))
                    >= rule.limit
                ):
                    continue
                if self._rng.random() < rule.probability:
                    self.injected[key] += 1
                    return rule
        return None


class _Injector:
    """The hooks of one client."""

    def __init__(self, plan: FaultPlan, client: Any, service: str):
        self.plan = plan
        self.client = client
        self.service = service
        self._params = threading.local()
        self._shadow: Any = None

    def keep_params(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        self._params.value = (model.name, dict(params))

    def before_call(self, model: Any, **_: Any) -> Any:
        name, kept = getattr(self._params, "value", (model.name, {}))
        params: dict[str, Any] = kept if name == model.name else {}
        rule = self.plan.choose(self.service, model.name, params)
        if rule is None:
            return None
        url = self.client.meta.endpoint_url
        kind = rule.kind
        if kind is Kind.KILL_BEFORE:
            raise Killed(f"killed before {self.service}.{model.name}")
        if kind is Kind.THROTTLE:
            code = _THROTTLE_CODE.get(self.service, "ThrottlingException")
            raise _client_error(code, 400, model.name)
        if kind is Kind.SERVER_ERROR:
            raise _client_error("InternalServerError", 500, model.name)
        if kind is Kind.CONNECT_TIMEOUT:
            raise ConnectTimeoutError(endpoint_url=url)
        if kind is Kind.PARTIAL_BATCH and model.name == "SendMessageBatch":
            entries = list(params.get("Entries", []))
            keep, drop = entries[: len(entries) // 2], entries[len(entries) // 2 :]
            sent = self._call(model.name, {**params, "Entries": keep}) if keep else {"Successful": []}
            failed = [
                {"Id": e["Id"], "SenderFault": False, "Code": "InternalError", "Message": "injected"}
                for e in drop
            ]
            parsed = {"Successful": sent.get("Successful", []), "Failed": failed}
            return _Http(200), parsed
        # the rest reach the service first
        self._call(model.name, params)
        if kind is Kind.KILL_AFTER:
            raise Killed(f"killed after {self.service}.{model.name}")
        if kind is Kind.LOST_RESPONSE:
            raise ReadTimeoutError(endpoint_url=url)
        return None  # RESET_AFTER_WRITE: the call goes on, as botocore's retry of the reset request

    def _call(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        if self._shadow is None:
            self._shadow = boto3.session.Session(region_name=self.client.meta.region_name).client(
                self.service
            )
        from botocore import xform_name

        return getattr(self._shadow, xform_name(operation))(**params)


class _Http:
    """The part of an HTTP response botocore reads when a ``before-call`` hook answers the call."""

    def __init__(self, status_code: int):
        self.status_code = status_code
        self.headers: dict[str, str] = {}


def _client_error(code: str, status: int, operation: str) -> ClientError:
    return ClientError(
        {
            "Error": {"Code": code, "Message": "injected fault"},
            "ResponseMetadata": {"HTTPStatusCode": status},
        },
        operation,
    )


def hook(plan: FaultPlan, client: Any, service: str) -> Any:
    """Register the plan's hooks on ``client`` (first, before any other handler); return it."""
    injector = _Injector(plan, client, service)
    client.meta.events.register_first(f"before-parameter-build.{service}", injector.keep_params)
    client.meta.events.register_first(f"before-call.{service}", injector.before_call)
    return client


class FaultyClients(Clients):
    """The functions' clients (:class:`jobsched.aws.clients.Clients`, created on first use as on AWS),
    each carrying the plan's hooks: what the fault battery installs in each function's seam."""

    def __init__(self, plan: FaultPlan, **kwargs: Any):
        super().__init__(**kwargs)
        self.plan = plan

    def client(self, service: str) -> Any:
        return hook(self.plan, super().client(service), service)
