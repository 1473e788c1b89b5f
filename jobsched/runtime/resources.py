"""Names and shapes of every AWS resource jobsched uses, defined once.

``infra/`` builds the CDK resources from these specs, ``jobsched/local`` provisions the same tables
and queues in the embedded mode, and the functions read the physical names from the environment
variables named here. Local and cloud cannot drift because both read this module.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# --- environment variables (set by infra/ and by the local mode, read by jobsched.runtime.settings) -------
ENV_JOBS_TABLE = "JOBSCHED_JOBS_TABLE"
ENV_RUNS_TABLE = "JOBSCHED_RUNS_TABLE"
ENV_LEASES_TABLE = "JOBSCHED_LEASES_TABLE"
ENV_IDEMPOTENCY_TABLE = "JOBSCHED_IDEMPOTENCY_TABLE"
ENV_BUCKET = "JOBSCHED_BUCKET"
ENV_QUEUE_URL_PREFIX = "JOBSCHED_QUEUE_URL_"  # + priority in upper case, e.g. JOBSCHED_QUEUE_URL_HIGH
ENV_DLQ_URL_PREFIX = "JOBSCHED_DLQ_URL_"  # + priority in upper case
ENV_SHARDS = "JOBSCHED_SHARDS"
ENV_LOOKAHEAD_SECONDS = "JOBSCHED_LOOKAHEAD_SECONDS"
# How far ahead a due job's occurrences are enqueued (SQS DelaySeconds): amortizes the job advance
# (1 item write + 2 due-index writes) over several runs. See docs/decisions/0001-data-model.md.
ENV_ENQUEUE_HORIZON_SECONDS = "JOBSCHED_ENQUEUE_HORIZON_SECONDS"
#: Backpressure (jobsched/services/backpressure.py), per priority of :data:`BACKPRESSURE_PRIORITIES`
#: (+ the priority in upper case): a dispatcher tick holds back its due jobs of that priority while
#: the queue has at least ``..._DEPTH_<P>`` visible messages, or while it has visible messages and its
#: oldest queued run has waited ``..._AGE_SECONDS_<P>`` seconds since due (0 = that signal off). Set
#: on the dispatcher only (CDK context ``backpressure_depth``, ``backpressure_age_seconds``).
ENV_BACKPRESSURE_DEPTH_PREFIX = "JOBSCHED_BACKPRESSURE_DEPTH_"
ENV_BACKPRESSURE_AGE_PREFIX = "JOBSCHED_BACKPRESSURE_AGE_SECONDS_"
ENV_STATE_MACHINE_ARN = "JOBSCHED_STATE_MACHINE_ARN"
ENV_ALLOWED_HTTP_HOSTS = "JOBSCHED_ALLOWED_HTTP_HOSTS"
#: Comma-separated SNS topic ARN patterns (IAM syntax, ``*`` and ``?``) that dead-letter notifications
#: may be published to: the API refuses any other ``notify.sns_topic_arn``, and the sending functions'
#: IAM policy allows ``sns:Publish`` on exactly these (CDK context ``notify_topic_arns``).
ENV_NOTIFY_TOPIC_ARNS = "JOBSCHED_NOTIFY_TOPIC_ARNS"
ENV_AUTH_MODE = "JOBSCHED_AUTH_MODE"
ENV_TENANT_TOKENS = "JOBSCHED_TENANT_TOKENS"
#: Comma-separated modules that register job handlers (``@job``), imported by the api function (so an
#: unknown handler is refused at job creation) and by the worker (so it can run them).
ENV_HANDLER_MODULES = "JOBSCHED_HANDLER_MODULES"
#: The code version of the deployment (decision 0048): the Lambda asset's hash, set by the CDK stack on
#: every function; the git revision in ``jobsched dev``. Each attempt records it (``Attempt.code_version``).
ENV_CODE_VERSION = "JOBSCHED_CODE_VERSION"
#: Records of one SQS batch the worker handles at once (threads; each record has its own lease).
ENV_WORKER_CONCURRENCY = "JOBSCHED_WORKER_CONCURRENCY"
#: Jobs of a due page whose writes a dispatcher tick makes at once (threads; docs/scaling.md).
ENV_DISPATCH_CONCURRENCY = "JOBSCHED_DISPATCH_CONCURRENCY"
#: How late, in milliseconds, a dispatcher tick may land a run's message after its due instant when it
#: aligns its sends to the second (decision 0032); 0 turns the alignment off (delays rounded down, the
#: message surfaces up to 1 s early and the worker waits). The embedded mode sets 0.
ENV_SEND_ALIGN_MS = "JOBSCHED_SEND_ALIGN_MS"
#: Days a run is kept: its item carries the Runs table's TTL attribute (``expires_at``) = created (or
#: last replayed) + this, and the bucket's lifecycle rule expires outputs and payloads this many days
#: after they were written. One deployment setting (CDK context ``retention_days``) sets both.
ENV_RETENTION_DAYS = "JOBSCHED_RETENTION_DAYS"
#: The embedded mode only (``jobsched dev --retention-minutes``): the retention in seconds, in place of
#: the days (infra never sets it). At least :data:`MIN_RETENTION_SECONDS`.
ENV_RETENTION_SECONDS = "JOBSCHED_RETENTION_SECONDS"
#: Where a run's log lines are: on AWS the worker function's CloudWatch log group (set on the api
#: function, for the run view's Logs Insights query); in the embedded mode the dev log file the
#: functions write (read by the embedded-mode-only ``GET /runs/{id}/logs``).
ENV_RUN_LOG_GROUP = "JOBSCHED_RUN_LOG_GROUP"
ENV_RUN_LOG_FILE = "JOBSCHED_RUN_LOG_FILE"
#: The deployment's default per-tenant limits (CDK context ``tenant_max_running``,
#: ``tenant_runs_per_second``, ``tenant_burst``), for tenants an operator gave no limits of their
#: own (``PUT /admin/tenants/{tenant}/limits``); 0 = no limit. Read by the worker.
ENV_TENANT_MAX_RUNNING = "JOBSCHED_TENANT_MAX_RUNNING"
ENV_TENANT_RUNS_PER_SECOND = "JOBSCHED_TENANT_RUNS_PER_SECOND"
ENV_TENANT_BURST = "JOBSCHED_TENANT_BURST"
#: Fair shares (decision 0057): per Lambda queue, the invocations one tenant may hold
#: (``default=20,low=5,high=20``: the queues' ``max_concurrency``), whose mappings' ceiling is raised
#: to ``ceil(slots / fair_share)``. Unset or empty: no share is enforced. Read by the worker.
ENV_TENANT_SLOTS = "JOBSCHED_TENANT_SLOTS"
#: The deployment's fair share (``0.8``), set beside ``JOBSCHED_TENANT_SLOTS``: with it a tenant's
#: slots follow the pool's ceiling as the capacity function sets it (``max(slots, floor(ceiling *
#: fair_share))``, the ceiling read from the Leases table), and the capacity function writes that
#: ceiling there. Unset: the slots stay ``JOBSCHED_TENANT_SLOTS``. Read by the worker and the capacity
#: function.
ENV_FAIR_SHARE = "JOBSCHED_FAIR_SHARE"

# --- the embedded mode's fairness lanes -------------------------------------------------------------
#: The HTTP header naming the tenant a DynamoDB request is made for (the lane it waits in): added by
#: the embedded mode's clients (jobsched.aws.clients.set_lane_source), read by its emulated DynamoDB
#: (jobsched.local.moto_fixes.lanes, decision 0033). Never sent on AWS: nothing sets a lane source there.
LANE_HEADER = "x-jobsched-lane"

PRIORITIES = ("high", "default", "low")
#: The pools a run may execute in (decision 0051): ``lambda`` (the priority's queue: high, default or
#: low), ``long`` (the long queue's own Lambda function: chunks and long jobs up to Lambda's limit) and
#: ``container`` (ECS Fargate tasks running the same worker loop; timeouts up to 12 hours).
POOLS = ("lambda", "long", "container")
#: The queue the container pool consumes (no Lambda function consumes it).
CONTAINER_KIND = "container"
#: The queues Lambda event source mappings consume (the worker functions; the embedded mode's pollers).
LAMBDA_QUEUE_KINDS = (*PRIORITIES, "long")
#: The queues whose pools have fair shares (decision 0057): batches of runs; not ``long`` (one chunk
#: per invocation, its own reserved capacity).
FAIR_SHARE_QUEUES = PRIORITIES
QUEUE_KINDS = (*LAMBDA_QUEUE_KINDS, CONTAINER_KIND)
#: Lambda's own limit on an invocation: the longest timeout a run on the ``lambda`` or ``long`` pool
#: may have. The embedded mode may lower it (``ENV_LAMBDA_TIME_LIMIT``) to test long work quickly.
LAMBDA_TIME_LIMIT_SECONDS = 900
#: The longest timeout a run on the ``container`` pool may have: SQS's maximum visibility timeout.
MAX_CONTAINER_TIMEOUT_SECONDS = 12 * 3600
#: The container pool's task size (Fargate CPU units, 1024 = 1 vCPU, and memory in MiB): the stack sets
#: them from ``container_cpu`` / ``container_memory`` in the task's environment, and the loop prices its
#: runs' Fargate time by them (usage, decision 0059 amended). Unset: the stack's defaults; ``0``
#: (a loop on machines of one's own, not Fargate): no Fargate time is counted.
ENV_CONTAINER_CPU = "JOBSCHED_CONTAINER_CPU"
ENV_CONTAINER_MEMORY_MB = "JOBSCHED_CONTAINER_MEMORY_MB"
DEFAULT_CONTAINER_CPU = 1024
DEFAULT_CONTAINER_MEMORY_MB = 2048
#: The embedded mode only (``jobsched dev --lambda-time-limit``): Lambda's time limit in seconds, in
#: place of 900, for the API's checks and the embedded invocations (infra never sets it).
ENV_LAMBDA_TIME_LIMIT = "JOBSCHED_LAMBDA_TIME_LIMIT_SECONDS"
#: The sweeper's grace in seconds (:mod:`jobsched.services.sweeper`): how long past its due instant (its
#: retry, its lease's end) a run waits before the sweeper acts on it, and between two of its re-sends.
#: 120 on AWS (infra never sets it); the embedded mode only (``jobsched dev --sweeper-grace-seconds``)
#: may shorten it, to at least :data:`MIN_SWEEPER_GRACE_SECONDS`.
ENV_SWEEPER_GRACE_SECONDS = "JOBSCHED_SWEEPER_GRACE_SECONDS"
DEFAULT_SWEEPER_GRACE_SECONDS = 120
MIN_SWEEPER_GRACE_SECONDS = 10
#: The priorities backpressure may hold back: never ``high`` (docs/decisions/0028).
BACKPRESSURE_PRIORITIES = ("default", "low")

# --- DynamoDB -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Key:
    name: str
    type: str  # "S" | "N"


@dataclass(frozen=True)
class Index:
    name: str
    partition: Key
    sort: Key | None = None
    projection: str = "KEYS_ONLY"  # "KEYS_ONLY" | "ALL" | "INCLUDE"
    include: tuple[str, ...] = ()


@dataclass(frozen=True)
class TableSpec:
    logical_name: str
    env_var: str
    partition: Key
    sort: Key | None = None
    indexes: tuple[Index, ...] = ()
    ttl_attribute: str | None = None
    doc: str = ""

    def attribute_definitions(self) -> list[dict[str, str]]:
        keys: dict[str, str] = {}
        for key in (self.partition, self.sort):
            if key:
                keys[key.name] = key.type
        for index in self.indexes:
            for key in (index.partition, index.sort):
                if key:
                    keys[key.name] = key.type
        return [{"AttributeName": n, "AttributeType": t} for n, t in keys.items()]

    def create_table_kwargs(self, table_name: str) -> dict:
        """Arguments for boto3 ``create_table`` (used by the local mode and the moto tests)."""
        key_schema = [{"AttributeName": self.partition.name, "KeyType": "HASH"}]
        if self.sort:
            key_schema.append({"AttributeName": self.sort.name, "KeyType": "RANGE"})
        kwargs: dict = {
            "TableName": table_name,
            "KeySchema": key_schema,
            "AttributeDefinitions": self.attribute_definitions(),
            "BillingMode": "PAY_PER_REQUEST",
        }
        if self.indexes:
            gsis = []
            for index in self.indexes:
                schema = [{"AttributeName": index.partition.name, "KeyType": "HASH"}]
                if index.sort:
                    schema.append({"AttributeName": index.sort.name, "KeyType": "RANGE"})
                projection: dict = {"ProjectionType": index.projection}
                if index.projection == "INCLUDE":
                    projection["NonKeyAttributes"] = list(index.include)
                gsis.append({"IndexName": index.name, "KeySchema": schema, "Projection": projection})
            kwargs["GlobalSecondaryIndexes"] = gsis
        return kwargs


JOBS_TABLE = TableSpec(
    logical_name="Jobs",
    env_var=ENV_JOBS_TABLE,
    partition=Key("tenant", "S"),
    sort=Key("job_id", "S"),
    indexes=(
        # Sparse: only active jobs with a next due instant carry due_shard/due_at.
        Index("due_index", Key("due_shard", "S"), Key("due_at", "N"), projection="KEYS_ONLY"),
    ),
    doc="Job definitions, one item per job; the sparse due index drives the dispatcher.",
)

RUNS_TABLE = TableSpec(
    logical_name="Runs",
    env_var=ENV_RUNS_TABLE,
    partition=Key("job_id", "S"),
    sort=Key("run_key", "S"),
    indexes=(
        # Sparse: only dead-lettered runs carry dl_tenant/dl_at. (No tenant index: a tenant's runs are
        # listed through the run feed items kept in this table, docs/decisions/0004-tenant-run-feed.md.)
        Index("dead_letter_index", Key("dl_tenant", "S"), Key("dl_at", "S"), projection="ALL"),
    ),
    ttl_attribute="expires_at",
    doc="One item per run (id derived from job id + scheduled instant); history, attempts, leases; "
    "the tenant run feed (pk feed#<tenant>).",
)

LEASES_TABLE = TableSpec(
    logical_name="Leases",
    env_var=ENV_LEASES_TABLE,
    partition=Key("lease_key", "S"),
    ttl_attribute="expires_at",
    doc="Shard leases with fencing tokens, concurrency semaphores, token buckets.",
)

IDEMPOTENCY_TABLE = TableSpec(
    logical_name="Idempotency",
    env_var=ENV_IDEMPOTENCY_TABLE,
    partition=Key("id", "S"),
    ttl_attribute="expiration",
    doc="Powertools idempotency records for handlers' external effects.",
)

TABLES = (JOBS_TABLE, RUNS_TABLE, LEASES_TABLE, IDEMPOTENCY_TABLE)

# --- SQS ------------------------------------------------------------------------------------------


#: Receives after which SQS redrives a run message to its DLQ (every queue's ``maxReceiveCount``).
QUEUES_MAX_RECEIVE_COUNT = 5


@dataclass(frozen=True)
class QueueSpec:
    kind: str  # one of QUEUE_KINDS
    max_receive_count: int = QUEUES_MAX_RECEIVE_COUNT
    retention_days: int = 14
    dlq_retention_days: int = 14

    @property
    def env_var(self) -> str:
        return ENV_QUEUE_URL_PREFIX + self.kind.upper()

    @property
    def dlq_env_var(self) -> str:
        return ENV_DLQ_URL_PREFIX + self.kind.upper()


QUEUES = tuple(QueueSpec(kind) for kind in QUEUE_KINDS)

# --- Lambda functions: name -> handler path (module.attribute inside the asset) ------------------


@dataclass(frozen=True)
class FunctionSpec:
    name: str
    handler: str
    memory_mb: int
    timeout_seconds: int
    doc: str = ""
    env: tuple[str, ...] = field(default=())


FUNCTIONS = (
    FunctionSpec("api", "functions.api.handler", 512, 29, "HTTP API (API Gateway HTTP API v2 events)"),
    FunctionSpec(
        "dispatcher", "functions.dispatcher.handler", 512, 60, "per-shard tick: due jobs -> runs -> queues"
    ),
    FunctionSpec("worker", "functions.worker.handler", 512, 900, "SQS batches of runs: execute with leases"),
    FunctionSpec("dlq_consumer", "functions.dlq_consumer.handler", 256, 60, "poison messages -> failed runs"),
    FunctionSpec(
        "sweeper", "functions.sweeper.handler", 256, 300, "re-sends lost runs, reclaims expired leases"
    ),
)

#: The capacity function (decision 0055): raises and lowers the worker mappings' MaximumConcurrency on
#: the forecast and the queues' ages, once a minute. Not in :data:`FUNCTIONS`: the stack builds it only
#: while its ``capacity`` setting is on (infra/capacity.py), and the embedded mode runs its own loop
#: against the pollers instead (jobsched/local/capacity.py).
CAPACITY_FUNCTION = FunctionSpec(
    "capacity", "functions.capacity.handler", 256, 60, "pre-warms and scales the worker mappings"
)
#: The capacity function's own variables: ``<prefix><KIND>`` is the UUID of the queue kind's event
#: source mapping; the policy is JSON ``{kind: {"base": n, "cap": n, "batch_size": n}}``.
ENV_CAPACITY_MAPPING_PREFIX = "JOBSCHED_CAPACITY_MAPPING_"
ENV_CAPACITY_QUEUES = "JOBSCHED_CAPACITY_QUEUES"
#: ``<cluster>/<service>`` of the container pool's ECS service whose scalable target's MinCapacity the
#: capacity function raises before a peak (set only with ``capacity_max_warm_tasks``; decision 0055).
ENV_CAPACITY_CONTAINER_SERVICE = "JOBSCHED_CAPACITY_CONTAINER_SERVICE"
#: The worker function (``default``/``low``) whose alias :data:`WORKER_ALIAS` the capacity function
#: provisions, and the most provisioned concurrency it asks for (set only with
#: ``capacity_max_provisioned``; decision 0055).
ENV_CAPACITY_WORKER_FUNCTION = "JOBSCHED_CAPACITY_WORKER_FUNCTION"
ENV_CAPACITY_MAX_PROVISIONED = "JOBSCHED_CAPACITY_MAX_PROVISIONED"
#: The worker's alias the ``default`` and ``low`` mappings invoke when provisioned concurrency is on.
WORKER_ALIAS = "live"

DEFAULT_SHARDS = 4
DEFAULT_LOOKAHEAD_SECONDS = 60
DEFAULT_ENQUEUE_HORIZON_SECONDS = 900
#: Backpressure defaults per priority (0 = off): ``low`` is held back at 1000 visible messages, or
#: while its oldest queued run has waited 15 minutes; ``default`` is never held back unless configured.
DEFAULT_BACKPRESSURE_DEPTH = {"default": 0, "low": 1000}
DEFAULT_BACKPRESSURE_AGE_SECONDS = {"default": 0, "low": 900}
#: An age limit is 0 (off) or 120 s to 12 hours. 120 s is the sweeper's grace: it reads the runs of a
#: ledger item only once its earliest run is that far past due, so it measures no younger age.
MIN_BACKPRESSURE_AGE_SECONDS = 120
MAX_BACKPRESSURE_AGE_SECONDS = 12 * 3600
MAX_BACKPRESSURE_DEPTH = 1_000_000
#: The worker function's memory: the usage estimates price its handlers' seconds at this size.
WORKER_MEMORY_MB = next(spec.memory_mb for spec in FUNCTIONS if spec.name == "worker")
#: Records of one batch the worker handles at once (= the event source mapping's batch size).
DEFAULT_WORKER_CONCURRENCY = 10
#: Jobs a tick dispatches at once (CDK context ``dispatch_concurrency``, 1..64).
DEFAULT_DISPATCH_CONCURRENCY = 8
MAX_DISPATCH_CONCURRENCY = 64
DEFAULT_SEND_ALIGN_MS = 100
#: The largest margin accepted: past half a second, rounding up is simply late.
MAX_SEND_ALIGN_MS = 500
DEFAULT_RETENTION_DAYS = 30
#: The shortest retention the embedded mode takes (``--retention-minutes 10``): a run is kept at least
#: this long after it was due, well past a run's life in a development session.
MIN_RETENTION_SECONDS = 600
#: The longest retention accepted (ten years): beyond it a typo, not a policy.
MAX_RETENTION_DAYS = 3650
MAX_SQS_DELAY_SECONDS = 900
