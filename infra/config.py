"""Deployment settings, read from CDK context with documented defaults.

Every setting can be given on the command line (``cdk deploy -c shards=8``) or in ``cdk.json``.
Values from ``-c`` arrive as strings, so each is parsed and validated here, once, with an error that
names the setting. docs/deploy.md lists them with their meaning.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from jobsched.api.auth import DEFAULT_JWT_TENANT_CLAIM
from jobsched.core.errors import ValidationError
from jobsched.core.ids import DUE_PARTITIONS
from jobsched.core.shares import DEFAULT_FAIR_SHARE, check_share, pool_ceiling
from jobsched.runtime.resources import (
    BACKPRESSURE_PRIORITIES,
    DEFAULT_BACKPRESSURE_AGE_SECONDS,
    DEFAULT_BACKPRESSURE_DEPTH,
    DEFAULT_CONTAINER_CPU,
    DEFAULT_CONTAINER_MEMORY_MB,
    DEFAULT_DISPATCH_CONCURRENCY,
    DEFAULT_ENQUEUE_HORIZON_SECONDS,
    DEFAULT_LOOKAHEAD_SECONDS,
    DEFAULT_RETENTION_DAYS,
    DEFAULT_SHARDS,
    FAIR_SHARE_QUEUES,
    LAMBDA_QUEUE_KINDS,
    MAX_BACKPRESSURE_AGE_SECONDS,
    MAX_BACKPRESSURE_DEPTH,
    MAX_DISPATCH_CONCURRENCY,
    MAX_RETENTION_DAYS,
    MIN_BACKPRESSURE_AGE_SECONDS,
)

AUTH_MODES = ("iam", "jwt")
# Encryption at rest (infra/encryption.py): AWS-owned/managed keys, or one customer-managed KMS key.
ENCRYPTION_MODES = ("aws", "cmk")

# Per queue, the event source mapping's MaximumConcurrency (minimum 2): a ceiling on the concurrent
# worker invocations that queue may start. `default` and `low` share one worker function and the
# account's unreserved concurrency; `high` and `long` have a function each whose reserved concurrency
# (high_reserved_concurrency, long_reserved_concurrency) no other function can take (infra/workers.py,
# docs/decisions/0028 and 0051). The `container` queue has no mapping: the container pool consumes it.
DEFAULT_MAX_CONCURRENCY = {"high": 20, "default": 20, "low": 5, "long": 5}
#: The queues whose worker (``Worker``) invokes the alias provisioned concurrency is set on.
PROVISIONED_KINDS = ("default", "low")
MAX_RESERVED_CONCURRENCY = 1000

#: Fargate's task sizes: CPU units -> the memory sizes (MiB) a task of that CPU may have.
FARGATE_MEMORY: dict[int, tuple[int, ...]] = {
    256: (512, 1024, 2048),
    512: tuple(range(1024, 4096 + 1, 1024)),
    1024: tuple(range(2048, 8192 + 1, 1024)),
    2048: tuple(range(4096, 16384 + 1, 1024)),
    4096: tuple(range(8192, 30720 + 1, 1024)),
    8192: tuple(range(16384, 61440 + 1, 4096)),
    16384: tuple(range(32768, 122880 + 1, 8192)),
}
MAX_CONTAINER_TASKS = 1000
#: An image URI with its registry host, a repository and a tag or digest.
CONTAINER_IMAGE_PATTERN = re.compile(
    r"^[a-z0-9][a-z0-9.-]*(?::\d+)?/[a-z0-9._/-]+(?::[\w.-]+|@sha256:[0-9a-f]{64})$"
)
VPC_ID_PATTERN = re.compile(r"^vpc-[0-9a-f]{8,17}$")
SUBNET_ID_PATTERN = re.compile(r"^subnet-[0-9a-f]{8,17}$")

#: A ``notify_topic_arns`` pattern: an SNS topic ARN of one literal account; ``*``/``?`` allowed in the
#: region and the topic name only (so an allow-list never covers every account's topics).
NOTIFY_TOPIC_PATTERN = re.compile(r"^arn:aws(?:-[a-z]+)*:sns:[a-z0-9*?-]+:\d{12}:[A-Za-z0-9_.*?-]+$")


#: The tags the stack sets on every resource itself (infra/tags.py); ``tags`` may not name them.
RESERVED_TAG_KEYS = ("application", "stack", "component")
#: AWS's tag rules (the characters every service accepts): keys 1-128, values 0-256.
TAG_KEY_PATTERN = re.compile(r"^[\w .:/=+\-@]{1,128}$")
TAG_VALUE_PATTERN = re.compile(r"^[\w .:/=+\-@]{0,256}$")
DOCS_URL_PATTERN = re.compile(r"^https://\S+$")


class ConfigError(ValueError):
    """Raised when a CDK context value is missing a required companion or is out of range."""


@dataclass(frozen=True)
class StackConfig:
    """Everything a deployment may tune. Defaults suit a small team's first deployment."""

    shards: int = DEFAULT_SHARDS
    lookahead_seconds: int = DEFAULT_LOOKAHEAD_SECONDS
    # How far ahead a job's runs beyond the look-ahead are queued (decision 0030); a pause withdraws
    # and an edit re-plans what is queued, so a shorter horizon makes those cheaper and runs dearer.
    enqueue_horizon_seconds: int = DEFAULT_ENQUEUE_HORIZON_SECONDS
    # Backpressure per priority (default, low; never high): visible messages, and seconds the oldest
    # queued run has waited, at which dispatcher ticks hold back due jobs of that priority; 0 = off.
    backpressure_depth: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_BACKPRESSURE_DEPTH))
    backpressure_age_seconds: dict[str, int] = field(
        default_factory=lambda: dict(DEFAULT_BACKPRESSURE_AGE_SECONDS)
    )
    max_concurrency: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_MAX_CONCURRENCY))
    # The high worker function's reserved concurrency; unset = max_concurrency["high"] (every
    # invocation its mapping may start is reserved), 0 = none (a ceiling only, for accounts whose
    # concurrency quota cannot spare it), else at least max_concurrency["high"].
    high_reserved_concurrency: int | None = None
    # The long worker function's reserved concurrency (WorkerLong: chunks and long-pool jobs); unset =
    # max_concurrency["long"], 0 = none, else at least max_concurrency["long"].
    long_reserved_concurrency: int | None = None
    #: Build the container pool (infra/containers.py): an ECS Fargate service consuming the container
    #: queue. false leaves it out (the queue stays; jobs of the container pool then wait in it).
    container_pool: bool = True
    # Each container task's size (Fargate's valid cpu/memory pairs), its ceiling of tasks, Fargate Spot.
    container_cpu: int = DEFAULT_CONTAINER_CPU
    container_memory: int = DEFAULT_CONTAINER_MEMORY_MB
    container_max_tasks: int = 10
    container_spot: bool = False
    #: A prebuilt image URI (e.g. <account>.dkr.ecr.<region>.amazonaws.com/jobsched:1.4) instead of the
    #: image CDK builds from the repository's Dockerfile (which needs Docker at deploy time).
    container_image: str | None = None
    #: The user's own VPC for the tasks (with vpc_subnet_ids); unset = a VPC the stack creates.
    vpc_id: str | None = None
    vpc_subnet_ids: tuple[str, ...] = ()
    retention_days: int = DEFAULT_RETENTION_DAYS  # run items (DynamoDB TTL) and bucket objects (lifecycle)
    log_retention_days: int = 30
    auth_mode: str = "iam"
    jwt_issuer: str | None = None
    jwt_audience: tuple[str, ...] = ()
    jwt_tenant_claim: str = DEFAULT_JWT_TENANT_CLAIM
    admin_principals: tuple[str, ...] = ()
    alert_email: str | None = None
    api_rate_limit: int = 100
    api_burst_limit: int = 200
    sweeper_rate_minutes: int = 5
    long_job_max_concurrency: int = 10
    long_job_heartbeat_seconds: int = 120
    # OldestRun-<priority> alarms: the oldest due run still queued has waited longer than this since
    # its due instant (the sweeper measures it; docs/decisions/0040). At least the sweeper's grace.
    alarm_oldest_run_seconds: int = 300
    alarm_lag_p99_seconds: int = 10
    alarm_error_rate_percent: int = 5
    alarm_dead_letters: int = 1  # dead letters in 5 minutes that raise the DeadLetters alarm
    #: SuccessRate-<pool> alarms: the pool's attempts that succeeded, in % of those that ended, below this
    alarm_success_rate_percent: int = 95
    #: Where docs/ is published (e.g. https://github.com/acme/jobsched/blob/main/docs): the alarms'
    #: descriptions link to their section of operations.md there; unset = the path in the repository.
    docs_url: str = ""
    #: The user's own tags, on every resource besides application, stack and component (infra/tags.py):
    #: ``-c tags='{"team": "payments", "cost-center": "42"}'``.
    tags: dict[str, str] = field(default_factory=dict)
    notify_topic_arns: tuple[str, ...] = ()  # SNS topics dead-letter notifications may go to
    allowed_http_hosts: str = ""
    handler_modules: tuple[str, ...] = ()
    removal_policy_destroy: bool = False
    encryption: str = "aws"
    #: Create a Cognito user pool for the operator console's sign-in (infra/console.py); needs
    #: auth_mode=jwt, and the pool is then the API's JWT issuer.
    console_user_pool: bool = False
    # Default per-tenant limits (docs/semantics/limits.md); 0 = none. An operator sets a tenant's own
    # with PUT /admin/tenants/{tenant}/limits.
    tenant_max_running: int = 0
    #: The share of a Lambda queue's invocations one tenant may hold (decision 0057): high, default and
    #: low's mappings get MaximumConcurrency ceil(max_concurrency / fair_share), one tenant at most
    #: max_concurrency of them; the rest is head-room for other tenants' runs. 0.1 to 1; 1 = off.
    fair_share: float = DEFAULT_FAIR_SHARE
    tenant_runs_per_second: float = 0.0
    tenant_burst: int = 1
    #: Jobs of a due page a dispatcher tick writes at once (docs/scaling.md: a shard's throughput).
    dispatch_concurrency: int = DEFAULT_DISPATCH_CONCURRENCY
    #: Build the capacity function (infra/capacity.py, decision 0055): once a minute it raises each
    #: worker mapping's MaximumConcurrency before a forecast peak and while runs wait, up to its cap.
    capacity: bool = True
    #: Per Lambda queue, the most its mapping's MaximumConcurrency is raised to (unset: the queue's
    #: max_concurrency, i.e. never raised); at least max_concurrency, at most 1000, and within the
    #: reserved concurrency of high and long (a ceiling above a reservation would throttle).
    capacity_max_concurrency: dict[str, int] = field(default_factory=dict)
    #: The most container tasks the capacity function keeps running ahead of a forecast peak, as the
    #: container service's scalable-target MinCapacity (0, the default: never raised, and the
    #: function gets no Application Auto Scaling grant); at most container_max_tasks.
    capacity_max_warm_tasks: int = 0
    #: The most provisioned concurrency the capacity function asks for on the worker's alias ``live``
    #: (which the default and low mappings then invoke) ahead of a forecast peak, released after it
    #: (0, the default: no alias, no version published, never provisioned); at most the default and
    #: low caps together (more could never be invoked at once through their MaximumConcurrency).
    capacity_max_provisioned: int = 0

    def __post_init__(self) -> None:
        if not 1 <= self.shards <= DUE_PARTITIONS:
            raise ConfigError(
                f"shards must be between 1 and {DUE_PARTITIONS} (the due index's partitions), "
                f"got {self.shards}"
            )
        if set(self.max_concurrency) != set(LAMBDA_QUEUE_KINDS):
            raise ConfigError(f"max_concurrency needs exactly the queues {list(LAMBDA_QUEUE_KINDS)}")
        for kind, value in self.max_concurrency.items():
            if not 2 <= value <= 1000:
                raise ConfigError(f"max_concurrency[{kind}] must be between 2 and 1000, got {value}")
        if self.auth_mode not in AUTH_MODES:
            raise ConfigError(f"auth_mode must be one of {AUTH_MODES}, got {self.auth_mode!r}")
        if self.encryption not in ENCRYPTION_MODES:
            raise ConfigError(f"encryption must be one of {ENCRYPTION_MODES}, got {self.encryption!r}")
        if self.console_user_pool:
            if self.auth_mode != "jwt":
                raise ConfigError(
                    "console_user_pool=true needs auth_mode=jwt (a browser cannot sign SigV4 requests; "
                    "the API then accepts the pool's ID tokens)"
                )
            if self.jwt_issuer or self.jwt_audience:
                raise ConfigError(
                    "console_user_pool=true makes the user pool the JWT issuer: leave jwt_issuer and "
                    "jwt_audience unset"
                )
            if self.jwt_tenant_claim != DEFAULT_JWT_TENANT_CLAIM:
                raise ConfigError(
                    "console_user_pool=true reads the tenant from the custom:tenant claim: leave "
                    "jwt_tenant_claim unset"
                )
        elif self.auth_mode == "jwt" and not (self.jwt_issuer and self.jwt_audience):
            raise ConfigError("auth_mode=jwt needs jwt_issuer and jwt_audience (or console_user_pool=true)")
        for name in ("retention_days", "log_retention_days"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be at least 1 day")
        if self.retention_days > MAX_RETENTION_DAYS:
            raise ConfigError(
                f"retention_days must be at most {MAX_RETENTION_DAYS}, got {self.retention_days}"
            )
        if not 0 < self.lookahead_seconds <= 900:
            raise ConfigError(f"lookahead_seconds must be between 1 and 900, got {self.lookahead_seconds}")
        if not self.lookahead_seconds <= self.enqueue_horizon_seconds <= 900:
            raise ConfigError(
                f"enqueue_horizon_seconds must be between lookahead_seconds ({self.lookahead_seconds}) "
                f"and 900 (SQS's longest delay), got {self.enqueue_horizon_seconds}"
            )
        for pattern in self.notify_topic_arns:
            if not NOTIFY_TOPIC_PATTERN.match(pattern) or set(pattern.rsplit(":", 1)[-1]) <= {"*", "?"}:
                raise ConfigError(
                    f"notify_topic_arns: {pattern!r} must be an SNS topic ARN of one account, with * or "
                    "? only in the region and after a topic-name prefix, "
                    "e.g. arn:aws:sns:eu-west-1:123456789012:team-*"
                )
        if self.alarm_dead_letters < 1:
            raise ConfigError(f"alarm_dead_letters must be at least 1, got {self.alarm_dead_letters}")
        if not MIN_BACKPRESSURE_AGE_SECONDS <= self.alarm_oldest_run_seconds <= MAX_BACKPRESSURE_AGE_SECONDS:
            raise ConfigError(
                f"alarm_oldest_run_seconds must be {MIN_BACKPRESSURE_AGE_SECONDS} (the sweeper reads no run "
                f"due more recently) to {MAX_BACKPRESSURE_AGE_SECONDS}, got {self.alarm_oldest_run_seconds}"
            )
        try:
            check_share(self.fair_share)
        except ValidationError as exc:
            raise ConfigError(str(exc)) from None
        if not 0 <= self.tenant_max_running <= 1000:
            raise ConfigError(f"tenant_max_running must be 0 (none) to 1000, got {self.tenant_max_running}")
        if not 0 <= self.tenant_runs_per_second <= 1000:
            raise ConfigError(
                f"tenant_runs_per_second must be 0 (none) to 1000, got {self.tenant_runs_per_second}"
            )
        if not 1 <= self.tenant_burst <= 1000:
            raise ConfigError(f"tenant_burst must be 1 to 1000, got {self.tenant_burst}")
        if not 1 <= self.dispatch_concurrency <= MAX_DISPATCH_CONCURRENCY:
            raise ConfigError(
                f"dispatch_concurrency must be 1 to {MAX_DISPATCH_CONCURRENCY}, "
                f"got {self.dispatch_concurrency}"
            )
        self._check_backpressure()
        self._check_reservations()
        self._check_containers()
        self._check_capacity()

    def _check_reservations(self) -> None:
        for name, kind, reserved in (
            ("high_reserved_concurrency", "high", self.high_reservation),
            ("long_reserved_concurrency", "long", self.long_reservation),
        ):
            ceiling = self.mapping_ceiling(kind)
            if reserved != 0 and not ceiling <= reserved <= MAX_RESERVED_CONCURRENCY:
                raise ConfigError(
                    f"{name} must be 0 (no reservation) or between {self._ceiling_named(kind)} and "
                    f"{MAX_RESERVED_CONCURRENCY}, got {reserved}: a reservation below the "
                    f"{kind} mapping's MaximumConcurrency would throttle its deliveries"
                )

    def _check_capacity(self) -> None:
        unknown = sorted(set(self.capacity_max_concurrency) - set(LAMBDA_QUEUE_KINDS))
        if unknown:
            raise ConfigError(
                f"capacity_max_concurrency takes the queues {list(LAMBDA_QUEUE_KINDS)}, got {unknown}"
            )
        reservations = {"high": self.high_reservation, "long": self.long_reservation}
        for kind, cap in self.capacity_max_concurrency.items():
            base = self.mapping_ceiling(kind)
            if not base <= cap <= 1000:
                raise ConfigError(
                    f"capacity_max_concurrency[{kind}] must be between {self._ceiling_named(kind)} and "
                    f"1000, got {cap}"
                )
            reserved = reservations.get(kind, 0)
            if reserved and cap > reserved:
                raise ConfigError(
                    f"capacity_max_concurrency[{kind}] ({cap}) is above the {kind} worker's reserved "
                    f"concurrency ({reserved}): raise {kind}_reserved_concurrency to at least {cap}, or "
                    "set it to 0 (no reservation)"
                )

        if not 0 <= self.capacity_max_warm_tasks <= self.container_max_tasks:
            raise ConfigError(
                f"capacity_max_warm_tasks must be 0 (never raised) to container_max_tasks "
                f"({self.container_max_tasks}), got {self.capacity_max_warm_tasks}"
            )
        self._check_provisioned()
        if self.capacity_max_warm_tasks and not (self.container_pool and self.capacity):
            raise ConfigError(
                "capacity_max_warm_tasks needs container_pool=true and capacity=true (it raises the "
                "container service's minimum task count from the capacity function)"
            )

    def _check_provisioned(self) -> None:
        caps = self.capacity_caps()
        most = sum(caps[kind] for kind in PROVISIONED_KINDS)
        if not 0 <= self.capacity_max_provisioned <= most:
            raise ConfigError(
                f"capacity_max_provisioned must be 0 (never provisioned) to {most}, the default and low "
                f"queues' caps together (capacity_max_concurrency, else max_concurrency: their mappings "
                f"never invoke more at once), got {self.capacity_max_provisioned}"
            )
        if self.capacity_max_provisioned and not self.capacity:
            raise ConfigError(
                "capacity_max_provisioned needs capacity=true (the capacity function provisions the alias)"
            )

    def capacity_caps(self) -> dict[str, int]:
        """Each Lambda queue's cap for the capacity function: its setting, or its mapping's ceiling."""
        return {
            kind: self.capacity_max_concurrency.get(kind, self.mapping_ceiling(kind))
            for kind in LAMBDA_QUEUE_KINDS
        }

    def _ceiling_named(self, kind: str) -> str:
        """The queue's mapping's ceiling as a message names it: ``max_concurrency[kind] (N)``, or, with
        the fair share's head-room, the mapping's MaximumConcurrency and where it comes from."""
        ceiling = self.mapping_ceiling(kind)
        if ceiling == self.max_concurrency[kind]:
            return f"max_concurrency[{kind}] ({ceiling})"
        return (
            f"the {kind} mapping's MaximumConcurrency ({ceiling}: max_concurrency[{kind}] with the fair "
            f"share's head-room)"
        )

    def mapping_ceiling(self, kind: str) -> int:
        """The queue's mapping's MaximumConcurrency: max_concurrency, raised by the fair share's
        head-room on high, default and low (decision 0057)."""
        base = self.max_concurrency[kind]
        return pool_ceiling(base, self.fair_share) if kind in FAIR_SHARE_QUEUES else base

    def tenant_slots(self) -> dict[str, int]:
        """The invocations one tenant may hold per queue (JOBSCHED_TENANT_SLOTS); none at fair_share 1."""
        if self.fair_share >= 1:
            return {}
        return {kind: self.max_concurrency[kind] for kind in FAIR_SHARE_QUEUES}

    def _check_containers(self) -> None:
        cpu, memory = self.container_cpu, self.container_memory
        if cpu not in FARGATE_MEMORY:
            raise ConfigError(f"container_cpu must be one of {sorted(FARGATE_MEMORY)} (CPU units), got {cpu}")
        sizes = FARGATE_MEMORY[cpu]
        if memory not in sizes:
            step = f" in steps of {sizes[1] - sizes[0]}" if len(sizes) > 3 else ""
            raise ConfigError(
                f"container_memory must be one of {sizes[0]}..{sizes[-1]} MiB{step} for container_cpu={cpu} "
                f"(Fargate's task sizes: {', '.join(map(str, sizes[:3]))}, ...), got {memory}"
            )
        self._check_surface()
        if not 1 <= self.container_max_tasks <= MAX_CONTAINER_TASKS:
            raise ConfigError(
                f"container_max_tasks must be 1 to {MAX_CONTAINER_TASKS}, got {self.container_max_tasks}"
            )
        if self.container_image is not None and not CONTAINER_IMAGE_PATTERN.match(self.container_image):
            raise ConfigError(
                f"container_image must be an image URI such as "
                f"123456789012.dkr.ecr.eu-west-1.amazonaws.com/jobsched:1.4, got {self.container_image!r}"
            )
        if bool(self.vpc_id) != bool(self.vpc_subnet_ids):
            raise ConfigError(
                "vpc_id and vpc_subnet_ids go together: name your VPC and the subnets (comma-separated) "
                "its container tasks run in, or neither for a VPC the stack creates"
            )
        if self.vpc_id is not None and not VPC_ID_PATTERN.match(self.vpc_id):
            raise ConfigError(f"vpc_id must look like vpc-0123456789abcdef0, got {self.vpc_id!r}")
        for subnet in self.vpc_subnet_ids:
            if not SUBNET_ID_PATTERN.match(subnet):
                raise ConfigError(f"vpc_subnet_ids: {subnet!r} must look like subnet-0123456789abcdef0")

    def _check_surface(self) -> None:
        """The success-rate alarm's threshold, the docs URL and the user's tags (AWS's tag rules)."""
        if not 1 <= self.alarm_success_rate_percent <= 100:
            raise ConfigError(
                f"alarm_success_rate_percent must be 1 to 100, got {self.alarm_success_rate_percent}"
            )
        if self.docs_url and not DOCS_URL_PATTERN.match(self.docs_url):
            raise ConfigError(f"docs_url must be an https:// URL without spaces, got {self.docs_url!r}")
        for key, value in self.tags.items():
            if key in RESERVED_TAG_KEYS:
                raise ConfigError(
                    f"tags: {key!r} is set by the stack itself ({', '.join(RESERVED_TAG_KEYS)})"
                )
            if not TAG_KEY_PATTERN.match(key) or key.lower().startswith("aws:"):
                raise ConfigError(
                    f"tags: key {key!r} must be 1 to 128 letters, digits, spaces or _.:/=+-@ and not start "
                    "with aws:"
                )
            if not TAG_VALUE_PATTERN.match(value):
                raise ConfigError(
                    f"tags[{key}]: value {value!r} must be at most 256 letters, digits, spaces or _.:/=+-@"
                )

    def _check_backpressure(self) -> None:
        for name, limits in (
            ("backpressure_depth", self.backpressure_depth),
            ("backpressure_age_seconds", self.backpressure_age_seconds),
        ):
            if "high" in limits:
                raise ConfigError(f"{name}: backpressure never applies to high (its capacity is reserved)")
            if set(limits) != set(BACKPRESSURE_PRIORITIES):
                raise ConfigError(
                    f"{name} takes the priorities {list(BACKPRESSURE_PRIORITIES)}, got {sorted(limits)}"
                )
        for priority, depth in self.backpressure_depth.items():
            if not 0 <= depth <= MAX_BACKPRESSURE_DEPTH:
                raise ConfigError(
                    f"backpressure_depth[{priority}] must be 0 (off) to {MAX_BACKPRESSURE_DEPTH}, got {depth}"
                )
        for priority, age in self.backpressure_age_seconds.items():
            if age != 0 and not MIN_BACKPRESSURE_AGE_SECONDS <= age <= MAX_BACKPRESSURE_AGE_SECONDS:
                raise ConfigError(
                    f"backpressure_age_seconds[{priority}] must be 0 (off) or "
                    f"{MIN_BACKPRESSURE_AGE_SECONDS} to {MAX_BACKPRESSURE_AGE_SECONDS}, got {age}"
                )

    @property
    def high_reservation(self) -> int:
        """The high worker's reserved concurrency: the setting, or by default high's ceiling."""
        if self.high_reserved_concurrency is None:
            return self.mapping_ceiling("high")
        return self.high_reserved_concurrency

    @property
    def long_reservation(self) -> int:
        """The long worker's reserved concurrency: the setting, or by default long's ceiling."""
        if self.long_reserved_concurrency is None:
            return self.max_concurrency["long"]
        return self.long_reserved_concurrency

    def worker_shares(self) -> dict[str, float]:
        """Each queue's share of the workers when every queue has work: its mapping's
        MaximumConcurrency over their sum (docs/semantics/limits.md, "Priorities")."""
        total = sum(self.max_concurrency.values())
        return {kind: self.max_concurrency[kind] / total for kind in LAMBDA_QUEUE_KINDS}

    @classmethod
    def from_context(cls, get: Any) -> StackConfig:
        """Build from a context getter such as ``app.node.try_get_context`` (None = not set)."""
        if get("payload_retention_days") not in (None, ""):
            raise ConfigError(
                "payload_retention_days was renamed retention_days (it now also expires run records)"
            )
        if get("alarm_oldest_message_seconds") not in (None, ""):
            raise ConfigError(
                "alarm_oldest_message_seconds was renamed alarm_oldest_run_seconds: the OldestRun alarms "
                "watch how long the oldest due run has waited since its due instant, no longer SQS's "
                "ApproximateAgeOfOldestMessage, which counts the delay of runs queued ahead "
                "(docs/decisions/0040); set alarm_oldest_run_seconds instead"
            )
        if get("low_backlog_limit") not in (None, ""):
            raise ConfigError(
                "low_backlog_limit was replaced by backpressure_depth (per priority), e.g. "
                """-c backpressure_depth='{"low": 1000}'"""
            )
        kwargs: dict[str, Any] = {}
        for f in cls.__dataclass_fields__.values():
            raw = get(f.name)
            if raw is None or raw == "":
                continue
            kwargs[f.name] = _parse(f.name, raw, cls.__dataclass_fields__[f.name].type)
        defaults = {
            "max_concurrency": DEFAULT_MAX_CONCURRENCY,
            "backpressure_depth": DEFAULT_BACKPRESSURE_DEPTH,
            "backpressure_age_seconds": DEFAULT_BACKPRESSURE_AGE_SECONDS,
        }
        for name, default in defaults.items():
            if name in kwargs:
                kwargs[name] = {**default, **kwargs[name]}
        return cls(**kwargs)


def _parse(name: str, raw: Any, type_name: Any) -> Any:
    """Turn a context value (a JSON value from cdk.json or a string from ``-c``) into the field's type."""
    text = str(type_name)
    try:
        if text in ("int", "int | None"):
            return int(raw)
        if text == "float":
            return float(raw)
        if text == "bool":
            return raw if isinstance(raw, bool) else str(raw).lower() in ("1", "true", "yes")
        if text.startswith("dict"):
            value = json.loads(raw) if isinstance(raw, str) else dict(raw)
            if not isinstance(value, dict):
                raise ValueError("not a JSON object")
            if text == "dict[str, str]":
                if any(not isinstance(v, str) for v in value.values()):
                    raise ValueError("values must be strings")
                return {str(k): v for k, v in value.items()}
            return {str(k): int(v) for k, v in value.items()}
        if text.startswith("tuple"):
            items = raw.split(",") if isinstance(raw, str) else list(raw)
            return tuple(str(i).strip() for i in items if str(i).strip())
        return str(raw)
    except (TypeError, ValueError, AttributeError) as exc:
        raise ConfigError(f"context value {name}={raw!r} is not a valid {text}") from exc
