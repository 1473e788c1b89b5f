"""The capacity function's own settings (decision 0055): its policy and the worker mappings it sets,
read from the variables infra/capacity.py gives it. The service itself is built by
:func:`jobsched.compose.pipeline.capacity_service_from_settings`."""

from __future__ import annotations

import json
from collections.abc import Mapping

from jobsched.core.capacity import CapacityPolicy, QueueCaps
from jobsched.core.pools import CONTAINER_QUEUE
from jobsched.runtime.resources import (
    ENV_CAPACITY_CONTAINER_SERVICE,
    ENV_CAPACITY_MAPPING_PREFIX,
    ENV_CAPACITY_MAX_PROVISIONED,
    ENV_CAPACITY_QUEUES,
    ENV_CAPACITY_WORKER_FUNCTION,
    WORKER_ALIAS,
)


def capacity_policy_from_env(env: Mapping[str, str]) -> tuple[CapacityPolicy, dict[str, str]]:
    """The capacity function's policy and the event source mapping UUID of each queue kind it sets,
    from its variables (infra/capacity.py writes them): ``JOBSCHED_CAPACITY_QUEUES`` (JSON
    ``{kind: {"base": n, "cap": n, "batch_size": n}}``) and ``JOBSCHED_CAPACITY_MAPPING_<KIND>``; the
    ``container`` kind, when the policy has it, has no mapping: its service is
    :func:`container_service_from_env`'s. A missing or malformed value raises ``ValueError`` naming
    the variable."""
    raw = env.get(ENV_CAPACITY_QUEUES, "")
    try:
        queues = json.loads(raw)
        caps = {str(k): QueueCaps(int(v["base"]), int(v["cap"])) for k, v in queues.items()}
        batches = {str(k): int(v["batch_size"]) for k, v in queues.items()}
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise ValueError(
            f"environment variable {ENV_CAPACITY_QUEUES} must be JSON "
            '{kind: {"base": n, "cap": n, "batch_size": n}}, got ' + repr(raw)
        ) from exc
    mappings: dict[str, str] = {}
    for kind in caps:
        if kind == CONTAINER_QUEUE:
            continue
        var = ENV_CAPACITY_MAPPING_PREFIX + kind.upper()
        if not env.get(var):
            raise ValueError(
                f"environment variable {var} (the {kind} queue's event source mapping) is not set"
            )
        mappings[kind] = env[var]
    # Provisioned concurrency only where the stack publishes the worker's alias (docs/scaling.md).
    raw_cap = env.get(ENV_CAPACITY_MAX_PROVISIONED, "0")
    try:
        provisioned_cap = int(raw_cap)
        if provisioned_cap < 0:
            raise ValueError(raw_cap)
    except ValueError as exc:
        raise ValueError(
            f"environment variable {ENV_CAPACITY_MAX_PROVISIONED} must be a whole number, 0 or more, "
            f"got {raw_cap!r}"
        ) from exc
    policy = CapacityPolicy(queues=caps, provisioned_cap=provisioned_cap, runs_per_unit=batches)
    return policy, mappings


def worker_alias_from_env(env: Mapping[str, str], policy: CapacityPolicy) -> tuple[str, str] | None:
    """``(worker function, alias)`` whose provisioned concurrency the function sets, from
    ``JOBSCHED_CAPACITY_WORKER_FUNCTION`` and :data:`WORKER_ALIAS`; None when the policy asks for none
    (``provisioned_cap`` 0). A cap with no function named raises ``ValueError`` naming the variable."""
    if not policy.provisioned_cap:
        return None
    function = env.get(ENV_CAPACITY_WORKER_FUNCTION, "")
    if not function:
        raise ValueError(
            f"environment variable {ENV_CAPACITY_WORKER_FUNCTION} (the worker whose alias "
            f"{WORKER_ALIAS!r} is provisioned) is not set, but {ENV_CAPACITY_MAX_PROVISIONED} is "
            f"{policy.provisioned_cap}"
        )
    return function, WORKER_ALIAS


def container_service_from_env(env: Mapping[str, str], policy: CapacityPolicy) -> tuple[str, str] | None:
    """``(cluster, service)`` of the container pool whose scalable target's minimum the function sets,
    from ``JOBSCHED_CAPACITY_CONTAINER_SERVICE`` (``<cluster>/<service>``); None when the policy has no
    ``container`` kind. A policy with one and no such variable, or a malformed value, raises
    ``ValueError`` naming the variable."""
    if CONTAINER_QUEUE not in policy.queues:
        return None
    cluster, _, service = env.get(ENV_CAPACITY_CONTAINER_SERVICE, "").partition("/")
    if not cluster or not service or "/" in service:
        raise ValueError(
            f"environment variable {ENV_CAPACITY_CONTAINER_SERVICE} must be <cluster>/<service> (the "
            f"container pool's ECS service), got {env.get(ENV_CAPACITY_CONTAINER_SERVICE, '')!r}"
        )
    return cluster, service
