"""DynamoDB wire-format conversion, item sizing rules and the :class:`Meter` that counts capacity.

The rules (documented by AWS, applied here because moto does not report sizes) are listed in
:mod:`jobsched.aws.metering`, which re-exports everything in this module.
"""

from __future__ import annotations

import math
import threading
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer

_SER = TypeSerializer()
_DESER = TypeDeserializer()


def to_dynamo_value(value: Any) -> Any:
    """Plain Python -> what TypeSerializer accepts (floats become Decimal via their shortest repr)."""
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"DynamoDB cannot store {value}")
        return Decimal(repr(value))
    if isinstance(value, dict):
        return {k: to_dynamo_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_dynamo_value(v) for v in value]
    return value


def serialize(item: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _SER.serialize(to_dynamo_value(v)) for k, v in item.items()}


def deserialize(item: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _DESER.deserialize(v) for k, v in item.items()}


def _value_size(value: dict[str, Any]) -> int:
    (kind, inner), *_ = value.items()
    if kind == "S":
        return len(inner.encode())
    if kind == "N":
        digits = len(inner.lstrip("-").replace(".", "").strip("0")) or 1
        return 1 + (digits + 1) // 2
    if kind == "B":
        return len(inner)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "M":
        return 3 + sum(len(k.encode()) + _value_size(v) + 1 for k, v in inner.items())
    if kind == "L":
        return 3 + sum(_value_size(v) + 1 for v in inner)
    if kind in ("SS", "NS", "BS"):
        return sum(_value_size({kind[0]: v}) for v in inner)
    return 0


def item_size(wire_item: Mapping[str, Any]) -> int:
    """Size in bytes of an item in wire format, by the DynamoDB sizing rules."""
    return sum(len(k.encode()) + _value_size(v) for k, v in wire_item.items())


def write_units(size: int) -> int:
    return max(1, math.ceil(size / 1024))


def read_units(size: int, consistent: bool) -> float:
    units = max(1, math.ceil(size / 4096))
    return float(units) if consistent else units / 2


class Meter:
    """Thread-safe counters of requests and (estimated and reported) capacity, per service and call."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self.requests: Counter[str] = Counter()  # "dynamodb.PutItem" -> calls
            self.wcu: defaultdict[str, float] = defaultdict(float)  # estimated write units, per operation
            self.rcu: defaultdict[str, float] = defaultdict(float)
            self.wcu_by_table: defaultdict[str, float] = defaultdict(float)
            self.rcu_by_table: defaultdict[str, float] = defaultdict(float)
            self.reported: defaultdict[str, float] = defaultdict(float)  # as reported by the service
            self.sqs_billed_requests = 0
            self.sqs_messages = 0
            #: What is billed outside the requests' units: ``sfn_transitions``, ``sns_publishes``,
            #: ``fargate_vcpu_seconds``, ``fargate_gb_seconds`` (:meth:`record_billed`).
            self.billed: defaultdict[str, float] = defaultdict(float)

    def record_dynamodb(
        self,
        operation: str,
        *,
        wcu: float = 0.0,
        rcu: float = 0.0,
        response: Mapping | None = None,
        table: str = "",
        requests: int = 1,
    ) -> None:
        """One request's units. ``requests=0`` adds units to a request already counted: a batched read
        whose items are recorded one by one, each in the context of the run it was for."""
        reported = 0.0
        consumed = (response or {}).get("ConsumedCapacity")
        for entry in consumed if isinstance(consumed, list) else [consumed] if consumed else []:
            reported += float(entry.get("CapacityUnits", 0.0))
        with self._lock:
            self.requests[f"dynamodb.{operation}"] += requests
            self.wcu[operation] += wcu
            self.rcu[operation] += rcu
            self.wcu_by_table[table] += wcu
            self.rcu_by_table[table] += rcu
            self.reported[operation] += reported

    def record_sqs(self, operation: str, payload_bytes: Iterable[int]) -> None:
        sizes = list(payload_bytes)
        billed = max(1, math.ceil(sum(sizes) / (64 * 1024)))
        with self._lock:
            self.requests[f"sqs.{operation}"] += 1
            self.sqs_billed_requests += billed
            self.sqs_messages += len(sizes)

    def record_items(self, wires: Iterable[Mapping[str, Any]]) -> None:
        """Items (wire format) a DynamoDB request returned or wrote. This meter keeps nothing of them;
        the per-tenant one (:class:`jobsched.services.usage.TenantMeter`) weighs by their ``tenant``
        who the requests made for no one tenant served (decision 0059)."""

    def record_billed(self, counter: str, amount: float, *, tenant: str | None = None) -> None:
        """``amount`` of a usage counter billed outside the requests' units (a Step Functions
        transition, an SNS publish, Fargate seconds), for ``tenant`` when it is known, else for whom
        the current request lane says (the per-tenant meter, decision 0059); this meter keeps totals."""
        with self._lock:
            self.billed[counter] += amount

    def record_request(self, service: str, operation: str) -> None:
        """One call of another service (e.g. ``sns.Publish``), counted in ``requests``."""
        with self._lock:
            self.requests[f"{service}.{operation}"] += 1

    def snapshot(self) -> dict[str, Any]:
        """A JSON-ready summary: totals and the per-operation breakdown."""
        with self._lock:
            return {
                "dynamodb": {
                    "requests": sum(v for k, v in self.requests.items() if k.startswith("dynamodb.")),
                    "wcu": float(sum(self.wcu.values())),
                    "rcu": float(sum(self.rcu.values())),
                    "reported_capacity_units": float(sum(self.reported.values())),
                    "wcu_by_operation": dict(self.wcu),
                    "rcu_by_operation": dict(self.rcu),
                    "wcu_by_table": dict(self.wcu_by_table),
                    "rcu_by_table": dict(self.rcu_by_table),
                },
                "sqs": {
                    "requests": sum(v for k, v in self.requests.items() if k.startswith("sqs.")),
                    "billed_requests": self.sqs_billed_requests,
                    "messages": self.sqs_messages,
                },
                "requests": dict(self.requests),
                "billed": dict(self.billed),
            }
