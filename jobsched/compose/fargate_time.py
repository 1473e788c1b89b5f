"""The container pool's Fargate time per tenant (decision 0059 amended; docs/container-worker.md).

A Fargate task is billed for its size (vCPU and memory) for as long as it runs, whatever it does.
:class:`FargateTime` splits the task's seconds between the deliveries the loop holds at once
(:class:`jobsched.core.usage.TaskTime`: each delivery weighs 1) and, when a delivery ends, counts its
share for its run's tenant as ``fargate_vcpu_seconds`` and ``fargate_gb_seconds`` on the worker path's
meter, and the seconds the task held nothing since the last delivery ended for no one tenant (shared
by the weights of the usage written after that delivery). The task size is the stack's
(``JOBSCHED_CONTAINER_CPU``, ``JOBSCHED_CONTAINER_MEMORY_MB``: :func:`task_size_from_env`)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping

from jobsched.aws.sizing import Meter
from jobsched.core.usage import TaskTime, fargate_usage
from jobsched.runtime.resources import (
    DEFAULT_CONTAINER_CPU,
    DEFAULT_CONTAINER_MEMORY_MB,
    ENV_CONTAINER_CPU,
    ENV_CONTAINER_MEMORY_MB,
)
from jobsched.runtime.settings import ConfigurationError


class FargateTime:
    """The loop's task time, counted per delivery (thread-safe). ``task_size``: (CPU units, memory
    MiB), None off Fargate (nothing counted); ``meter``: where the amounts are counted."""

    def __init__(
        self,
        task_size: tuple[int, int] | None,
        meter: Meter | None,
        monotonic: Callable[[], float] = time.monotonic,
    ):
        self.task_size = task_size
        self.meter = meter
        self.monotonic = monotonic
        self._lock = threading.Lock()
        self._time = TaskTime(monotonic())

    def begin(self, key: str) -> None:
        """A delivery ``key`` is held from now."""
        with self._lock:
            self._time.begin(key, self.monotonic())

    def end(self, key: str, body: str) -> None:
        """The delivery ``key`` (its message ``body``) ended: its share for its tenant, and the idle
        seconds since the last delivery ended for no one tenant."""
        now = self.monotonic()
        with self._lock:
            own = self._time.end(key, now)
            idle = self._time.take_idle(now)
        if self.task_size is None or self.meter is None:
            return
        cpu, memory = self.task_size
        for seconds, tenant in ((own, tenant_of(body)), (idle, None)):
            if seconds > 0:
                vcpu_seconds, gb_seconds = fargate_usage(seconds, cpu, memory)
                self.meter.record_billed("fargate_vcpu_seconds", vcpu_seconds, tenant=tenant)
                self.meter.record_billed("fargate_gb_seconds", gb_seconds, tenant=tenant)


def tenant_of(body: str) -> str | None:
    """The tenant a message is for: a run message's ``tenant``, a workflow message's (``chunk.plan``
    and ``chunk.complete`` carry it in ``run``); None for a body that names none."""
    try:
        data = json.loads(body)
    except (TypeError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    tenant = data.get("tenant")
    if not tenant and isinstance(data.get("run"), dict):
        tenant = data["run"].get("tenant")
    return tenant if isinstance(tenant, str) and tenant else None


def task_size_from_env(environ: Mapping[str, str]) -> tuple[int, int] | None:
    """(CPU units, memory MiB) of the task from ``JOBSCHED_CONTAINER_CPU`` and
    ``JOBSCHED_CONTAINER_MEMORY_MB`` (unset: the stack's defaults); None when either is ``0`` (not on
    Fargate: no Fargate time counted). :class:`ConfigurationError` naming the variable otherwise."""
    size = []
    for name, default in (
        (ENV_CONTAINER_CPU, DEFAULT_CONTAINER_CPU),
        (ENV_CONTAINER_MEMORY_MB, DEFAULT_CONTAINER_MEMORY_MB),
    ):
        raw = environ.get(name, "").strip()
        try:
            value = int(raw) if raw else default
        except ValueError:
            raise ConfigurationError(f"{name} must be a whole number, got {raw!r}") from None
        if value < 0:
            raise ConfigurationError(f"{name} must be 0 or more, got {value}")
        size.append(value)
    return None if 0 in size else (size[0], size[1])
