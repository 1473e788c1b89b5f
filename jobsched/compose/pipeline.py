"""The wiring: every service built from :class:`Settings` and :class:`Clients`, in one place.

The ``functions/`` entry points, the API's :mod:`jobsched.compose.api`, the embedded mode and the
benchmarks build their services here, so a service is assembled the same way on AWS, locally and
under test. Each factory takes an optional :class:`Meter` that sees every AWS call of the service
(the cost benchmark passes its own).

:func:`worker_from_settings` answers the worker function's view of a queue,
:class:`jobsched.services.deliveries.Deliveries`: a chunked job's workflow message (``chunk.*``) goes to
the chunk runner, an asynchronous backfill's message to the backfill service, any other message is a
run delivery for the worker.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from jobsched.aws.metering import Meter, dynamo_for
from jobsched.runtime import observability as obs
from jobsched.services.deliveries import Deliveries

# Each factory imports the services it builds when it is called (decision 0056): a function's cold
# start then imports only what its own factory needs — the dispatcher neither the worker, the chunk
# runner, the backfills nor the notifier; the DLQ consumer only the attempt store. The names below are
# for the annotations.
if TYPE_CHECKING:
    from jobsched.aws.attempts import AttemptStore
    from jobsched.aws.clients import Clients
    from jobsched.aws.queue_depths import QueueDepths
    from jobsched.aws.queues import RunQueues
    from jobsched.aws.tenant_limits import LimitsCache, TenantLimits
    from jobsched.core.capacity import CapacityPolicy
    from jobsched.core.clock import Clock
    from jobsched.core.handlers import HandlerCatalog
    from jobsched.long_jobs.chunk_runner import ChunkRunner
    from jobsched.ports.capacity import PoolCapacity
    from jobsched.ports.tables import Table
    from jobsched.runtime.settings import Settings
    from jobsched.services.backfills import BackfillService
    from jobsched.services.budget_skips import QueuedAheadCap
    from jobsched.services.budgets import BudgetCache, BudgetGate, BudgetService
    from jobsched.services.capacity import CapacityService
    from jobsched.services.dispatcher import Dispatcher
    from jobsched.services.dlq_consumer import DlqConsumer
    from jobsched.services.forecast import ForecastConfig, ForecastService
    from jobsched.services.jobs import JobService
    from jobsched.services.limits import LimitGate
    from jobsched.services.notifications import DeadLetterNotifier, NotifyPolicy
    from jobsched.services.shares import ShareGate
    from jobsched.services.sweeper import Sweeper
    from jobsched.services.usage import FunctionUsage, MappingPolls
    from jobsched.services.worker import Worker
    from jobsched.services.workflows import WorkflowEngine

#: The lease a worker takes on a run (extended by its heartbeats, every third of it).
DEFAULT_LEASE_SECONDS = 60.0


def dispatcher_from_settings(
    settings: Settings,
    clients: Clients,
    *,
    meter: Meter | None = None,
    owner: str | None = None,
    clock: Clock | None = None,
    sleep: Callable[[float], Any] | None = None,
    warn_budgets: bool = False,
) -> Dispatcher:
    """A dispatcher over the deployment's tables and queues, all calls metered by one ``meter``. With a
    ``clock`` (a tick's) it re-checks its lease and counts its send delays by that clock, and with a
    ``sleep`` on it its sends are aligned to the second by the settings' ``send_align_ms`` (decision
    0032). Without one (the API's immediate dispatch of a created job) both are taken from the
    dispatch's ``now``, and the dispatcher holds the wall clock. Tenants over their monthly budget are
    held (decision 0062); with ``warn_budgets`` (the dispatcher function's) it also owes and sends the
    80 % notifications."""
    from jobsched.aws.jobs_store import JobsStore
    from jobsched.aws.leases import Leases
    from jobsched.aws.queue_ages import QueueAges
    from jobsched.aws.queues import RunQueues
    from jobsched.aws.runs_store import RunsStore
    from jobsched.runtime.clock import SystemClock
    from jobsched.services.backpressure import Backpressure
    from jobsched.services.dispatcher import Dispatcher, DispatcherConfig

    meter = meter or Meter()
    dynamo = dynamo_for(settings, clients.dynamodb, meter)
    queues = RunQueues(clients.sqs, settings.queue_urls, meter)
    backpressure = Backpressure(queues, settings.backpressure, QueueAges(dynamo, settings.leases_table))
    return Dispatcher(
        JobsStore(dynamo, settings.jobs_table),
        RunsStore(dynamo, settings.runs_table, retention=settings.retention),
        Leases(dynamo, settings.leases_table),
        queues,
        config=DispatcherConfig(
            lookahead=timedelta(seconds=settings.lookahead_seconds),
            enqueue_horizon=timedelta(seconds=settings.enqueue_horizon_seconds),
            owner=owner or f"dispatcher-{uuid.uuid4().hex[:12]}",
            shards=settings.shards,
            concurrency=settings.dispatch_concurrency,
            send_late_margin=settings.send_align_ms / 1000,
            reads_clock=clock is not None,
        ),
        clock=clock or SystemClock(),
        backpressure=backpressure if backpressure.active else None,
        sleep=sleep,
        budgets=budget_gate_from_settings(settings, clients, dynamo, warn=warn_budgets),
    )


def budget_service_from_settings(settings: Settings, dynamo: Table) -> BudgetService:
    """Budgets (Leases table) measured against the usage items (Leases table), priced at the
    worker's memory as ``GET /usage`` prices them."""
    from jobsched.aws.budget_store import BudgetStore
    from jobsched.aws.usage_store import UsageStore
    from jobsched.runtime.resources import WORKER_MEMORY_MB
    from jobsched.services.budgets import BudgetService

    return BudgetService(
        BudgetStore(dynamo, settings.leases_table),
        UsageStore(dynamo, settings.leases_table, settings.retention_days),
        memory_mb=WORKER_MEMORY_MB,
    )


def budget_gate_from_settings(
    settings: Settings, clients: Clients, dynamo: Table, *, warn: bool = False
) -> BudgetGate:
    """The dispatcher's cached view of budgets (the container's cache); with ``warn``, the 80 %
    notifications through the dead-letter notifier."""
    from jobsched.services.budgets import BudgetGate, BudgetWarnings

    warnings = (
        BudgetWarnings(dynamo, settings.runs_table, lambda: notifier_from_settings(settings, clients, dynamo))
        if warn
        else None
    )
    return BudgetGate(budget_service_from_settings(settings, dynamo), warnings=warnings)


def queued_ahead_cap_from_settings(
    settings: Settings,
    dynamo: Table,
    attempts: AttemptStore,
    metrics: obs.MetricSink | None,
    cache: BudgetCache | None = None,
) -> QueuedAheadCap:
    """The worker's spend cap on runs queued ahead (:mod:`jobsched.services.budget_skips`): the
    budget gate (no warnings: the dispatcher's gate owes them) and the Jobs table, for the rewind."""
    from jobsched.aws.jobs_store import JobsStore
    from jobsched.services.budget_skips import QueuedAheadCap
    from jobsched.services.budgets import BudgetCache, BudgetGate

    gate = BudgetGate(budget_service_from_settings(settings, dynamo), cache=cache or BudgetCache())
    return QueuedAheadCap(gate, attempts, JobsStore(dynamo, settings.jobs_table), metrics)


def job_service_from_settings(
    settings: Settings,
    clients: Clients,
    *,
    meter: Meter | None = None,
    catalog: HandlerCatalog | None = None,
) -> JobService:
    """The job service over the deployment's tables and queues (the API builds it once per container)."""
    from jobsched.services.jobs import JobService

    dispatcher = dispatcher_from_settings(settings, clients, meter=meter, owner="api")
    return JobService(
        dispatcher.jobs,
        dispatcher.runs,
        dispatcher,
        catalog=catalog,
        notify_policy=notify_policy_from_settings(settings),
        lambda_time_limit_seconds=settings.lambda_time_limit_seconds,
    )


def backfill_service_from_settings(
    settings: Settings, clients: Clients, *, meter: Meter | None = None, dynamo: Table | None = None
) -> BackfillService:
    """Asynchronous backfills over the Runs table and the priority queues (the API starts them, the
    worker decides their slices; a slice of a tenant over its monthly budget is not made)."""
    from jobsched.aws.backfill_store import BackfillStore
    from jobsched.aws.runs_store import RunsStore
    from jobsched.services.backfills import BackfillService
    from jobsched.services.budgets import BudgetGate

    dynamo = dynamo or dynamo_for(settings, clients.dynamodb, meter)
    return BackfillService(
        BackfillStore(dynamo, settings.runs_table),
        RunsStore(dynamo, settings.runs_table, retention=settings.retention),
        run_queues_from_settings(settings, clients, dynamo),
        caps=BudgetGate(budget_service_from_settings(settings, dynamo)),
    )


def run_queues_from_settings(settings: Settings, clients: Clients, dynamo: Table) -> RunQueues:
    """The priority queues, every call metered on ``dynamo``'s meter (one meter sees a service's
    DynamoDB and SQS calls)."""
    from jobsched.aws.queues import RunQueues

    return RunQueues(clients.sqs, dict(settings.queue_urls), dynamo.meter)


def queue_depths_from_settings(settings: Settings, clients: Clients, dynamo: Table) -> QueueDepths:
    """The run queues' depth samples (decision 0064): every queue of the deployment, kept in the Runs
    table for the runs' retention."""
    from jobsched.aws.queue_depths import QueueDepths

    queues = run_queues_from_settings(settings, clients, dynamo)
    return QueueDepths(queues, tuple(settings.queue_urls), dynamo, settings.runs_table, settings.retention)


def notify_policy_from_settings(settings: Settings) -> NotifyPolicy:
    """What the deployment lets a ``notify`` name (topic allow-list, the SSRF guard's host allow-list)."""
    from jobsched.services.notifications import NotifyPolicy

    return NotifyPolicy(settings.notify_topic_arns, settings.allowed_http_hosts)


def notifier_from_settings(
    settings: Settings,
    clients: Clients,
    dynamo: Table,
    *,
    metrics: obs.MetricSink | None = None,
) -> DeadLetterNotifier:
    """The dead-letter notifier over the Runs table (outbox), the Leases table (tenant defaults) and
    SNS, all metered on ``dynamo``'s meter."""
    from jobsched.aws.notify_store import NotifyOutbox, Publisher, TenantSettingsStore
    from jobsched.services.notifications import DeadLetterNotifier

    return DeadLetterNotifier(
        outbox=NotifyOutbox(dynamo, settings.runs_table),
        settings=TenantSettingsStore(dynamo, settings.leases_table),
        publisher=Publisher(clients.sns, dynamo.meter),
        policy=notify_policy_from_settings(settings),
        metrics=metrics,
    )


def notifying_attempts(
    settings: Settings, clients: Clients, dynamo: Table, *, metrics: obs.MetricSink | None = None
) -> AttemptStore:
    """An attempt store whose dead letters are notified at once (the notifier is its listener)."""
    from jobsched.aws.attempts import AttemptStore

    notifier = notifier_from_settings(settings, clients, dynamo, metrics=metrics)
    return AttemptStore(dynamo, settings.runs_table, on_dead_letter=notifier.on_dead_letter)


def chunk_runner_from_settings(
    settings: Settings,
    clients: Clients,
    dynamo: Table,
    clock: Clock,
    owner: str,
    *,
    metrics: obs.MetricSink | None = None,
    heartbeat_seconds: float = DEFAULT_LEASE_SECONDS / 3,
) -> ChunkRunner | None:
    """The chunked-job runner when the deployment has a state machine (``JOBSCHED_STATE_MACHINE_ARN``),
    else None."""
    from jobsched.aws.outputs import OutputStore
    from jobsched.aws.step_functions import StepFunctions
    from jobsched.long_jobs.checkpoints import ChunkStore
    from jobsched.long_jobs.chunk_runner import ChunkRunner

    if not settings.state_machine_arn:
        return None
    return ChunkRunner(
        attempts=notifying_attempts(settings, clients, dynamo, metrics=metrics),
        outputs=OutputStore(clients.s3, settings.bucket),
        chunks=ChunkStore(dynamo, settings.leases_table),
        sqs=clients.sqs,
        stepfunctions=StepFunctions(clients.stepfunctions),
        state_machine_arn=settings.state_machine_arn,
        clock=clock,
        owner=owner,
        heartbeat_seconds=heartbeat_seconds,
        metrics=metrics,
        queue_urls=settings.queue_urls,
        meter=getattr(dynamo, "meter", None),
    )


def workflow_engine_from_settings(
    settings: Settings, clients: Clients, dynamo: Table, *, replay: Any = None, caps: Any = None
) -> WorkflowEngine:
    """The DAG workflow engine over the Runs table and the queues (``replay``: the run service's, for
    retries, and ``caps``: the spend caps a retry asks first; only the API's engine needs them)."""
    from jobsched.aws.runs_store import RunsStore
    from jobsched.services.workflows import WorkflowEngine

    runs = RunsStore(dynamo, settings.runs_table, retention=settings.retention)
    queues = run_queues_from_settings(settings, clients, dynamo)
    return WorkflowEngine(dynamo=dynamo, runs=runs, queues=queues, replay=replay, caps=caps)


def worker_from_settings(
    settings: Settings,
    clients: Clients,
    clock: Clock,
    owner: str,
    *,
    metrics: obs.MetricSink | None = None,
    meter: Meter | None = None,
    lease_seconds: float = DEFAULT_LEASE_SECONDS,
    limits_cache: LimitsCache | None = None,
    budget_cache: BudgetCache | None = None,
) -> Deliveries[Worker]:
    """The worker (and, with a state machine, the chunk runner) over the deployment's tables, queues
    and bucket: the function entry point and the local mode build it the same way. Its spend cap on
    runs queued ahead (decision 0062) keeps the tenants' statuses in ``budget_cache`` (the worker
    function's container cache; default: this worker's own)."""
    from jobsched.aws.outputs import OutputStore
    from jobsched.aws.usage_store import UsageStore
    from jobsched.services.usage import TenantMeter, UsageRecorder
    from jobsched.services.worker import Worker, WorkerConfig
    from jobsched.services.workflows import CompositeTargets
    from jobsched.targets.context import IdempotentEffects

    meter = meter or TenantMeter()
    usage = UsageRecorder(metrics or obs.NullSink(), clock, meter)
    metrics = usage
    dynamo = dynamo_for(settings, clients.dynamodb, meter)
    effects = (
        IdempotentEffects(clients.dynamodb, settings.idempotency_table)
        if settings.idempotency_table
        else None
    )
    chunks = chunk_runner_from_settings(
        settings, clients, dynamo, clock, owner, metrics=metrics, heartbeat_seconds=lease_seconds / 3
    )
    attempts = notifying_attempts(settings, clients, dynamo, metrics=metrics)
    workflows = workflow_engine_from_settings(settings, clients, dynamo)
    worker = Worker(
        config=WorkerConfig(
            owner=owner,
            lease_seconds=lease_seconds,
            allowed_http_hosts=tuple(settings.allowed_http_hosts),
            code_version=settings.code_version,
        ),
        attempts=attempts,
        outputs=OutputStore(clients.s3, settings.bucket),
        queues=run_queues_from_settings(settings, clients, dynamo),
        clock=clock,
        effects=effects,
        metrics=metrics,
        chunks=CompositeTargets(workflows, chunks),
        limits=limit_gate_from_settings(
            settings, clients, dynamo, attempts, lease_seconds, metrics=metrics, limits_cache=limits_cache
        ),
        on_finished=workflows.on_finished,
        budget_cap=queued_ahead_cap_from_settings(settings, dynamo, attempts, metrics, budget_cache),
    )
    store = UsageStore(dynamo, settings.leases_table, settings.retention_days)
    backfills = backfill_service_from_settings(settings, clients, dynamo=dynamo)
    shares = share_gate_from_settings(settings, clients, dynamo, clock, metrics=metrics)
    return Deliveries(worker, chunks, backfills, usage=usage, usage_store=store, shares=shares)


def share_gate_from_settings(
    settings: Settings,
    clients: Clients,
    dynamo: Table,
    clock: Clock,
    *,
    metrics: obs.MetricSink | None = None,
) -> ShareGate | None:
    """The fair share of the Lambda queues' invocations (decision 0057) over the Leases table; None
    when the deployment sets no tenant slots (``JOBSCHED_TENANT_SLOTS``)."""
    from jobsched.aws.limits_store import Semaphores
    from jobsched.services.shares import ShareGate

    if not settings.tenant_slots:
        return None
    return ShareGate(
        slots=Semaphores(dynamo, settings.leases_table),
        queues=run_queues_from_settings(settings, clients, dynamo),
        tenant_slots=settings.tenant_slots,
        queue_kinds={url: kind for kind, url in settings.queue_urls.items()},
        clock=clock,
        metrics=metrics,
        fair_share=settings.fair_share,
        scope=settings.leases_table,
    )


def function_usage_from_settings(
    settings: Settings, clients: Clients, clock: Clock, meter: Meter, function: str
) -> FunctionUsage:
    """Usage counting for ``function`` (a name of :data:`jobsched.runtime.resources.FUNCTIONS`): its
    invocations' units, as ``meter`` (a :class:`~jobsched.services.usage.TenantMeter`; any other
    meter counts nothing per tenant) saw them, and its duration at the function's memory, added to the
    usage items in the Leases table once per invocation (decision 0059)."""
    from jobsched.aws.usage_store import UsageStore
    from jobsched.runtime.resources import CAPACITY_FUNCTION, FUNCTIONS
    from jobsched.services.usage import FunctionUsage, UsageRecorder

    memory = next(spec.memory_mb for spec in (*FUNCTIONS, CAPACITY_FUNCTION) if spec.name == function)
    dynamo = dynamo_for(settings, clients.dynamodb, meter)
    store = UsageStore(dynamo, settings.leases_table, settings.retention_days)
    return FunctionUsage(UsageRecorder(obs.NullSink(), clock, meter), store, memory)


def mapping_polls_from_settings(settings: Settings, sweep_period_seconds: float) -> MappingPolls:
    """The deployment's event source mappings (a worker mapping per Lambda queue, a DLQ consumer
    mapping per dead-letter queue) for the deployment row's empty polls (decision 0059 amended)."""
    from jobsched.runtime.resources import LAMBDA_QUEUE_KINDS
    from jobsched.services.usage import MappingPolls

    mappings = sum(1 for kind in settings.queue_urls if kind in LAMBDA_QUEUE_KINDS) + len(settings.dlq_urls)
    return MappingPolls(mappings, sweep_period_seconds)


def tenant_limits_from_settings(
    settings: Settings, dynamo: Table, cache: LimitsCache | None = None
) -> TenantLimits:
    """The operator's per-tenant limits over the Leases table, with the deployment's defaults; reads
    kept in ``cache`` (default: this object's own)."""
    from jobsched.aws.tenant_limits import TenantLimits

    return TenantLimits(
        dynamo,
        settings.leases_table,
        default_max_running=settings.tenant_max_running,
        default_per_second=settings.tenant_runs_per_second,
        default_burst=settings.tenant_burst,
        cache=cache,
    )


def limit_gate_from_settings(
    settings: Settings,
    clients: Clients,
    dynamo: Table,
    attempts: AttemptStore,
    lease_seconds: float,
    *,
    metrics: obs.MetricSink | None = None,
    limits_cache: LimitsCache | None = None,
) -> LimitGate:
    """The concurrency and rate limits a worker checks before it claims a run (Leases table); the
    tenants' limits as read are kept in ``limits_cache`` (the worker function's container cache)."""
    from jobsched.aws.limits_store import Buckets, Semaphores
    from jobsched.services.limits import LimitGate

    return LimitGate(
        semaphores=Semaphores(dynamo, settings.leases_table),
        buckets=Buckets(dynamo, settings.leases_table),
        tenants=tenant_limits_from_settings(settings, dynamo, limits_cache),
        attempts=attempts,
        queues=run_queues_from_settings(settings, clients, dynamo),
        lease_seconds=lease_seconds,
        metrics=metrics,
    )


def dlq_consumer_from_settings(
    settings: Settings, clients: Clients, *, metrics: obs.MetricSink | None = None, meter: Meter | None = None
) -> DlqConsumer:
    """A DLQ consumer over the deployment's Runs table. Its dead letters are only marked as owing a
    notification (no SNS or Leases access): the sweeper delivers them."""
    from jobsched.aws.attempts import AttemptStore
    from jobsched.services.dlq_consumer import DlqConsumer

    dynamo = dynamo_for(settings, clients.dynamodb, meter)
    return DlqConsumer(AttemptStore(dynamo, settings.runs_table), metrics)


def sweeper_from_settings(
    settings: Settings, clients: Clients, *, metrics: obs.MetricSink | None = None, meter: Any = None
) -> Sweeper:
    """A sweeper over the deployment's tables and queues; it delivers owed dead-letter notifications."""
    from jobsched.aws.attempts import AttemptStore
    from jobsched.aws.jobs_store import JobsStore
    from jobsched.aws.queue_ages import QueueAges
    from jobsched.aws.run_stats_store import RunStatsStore
    from jobsched.services.deadlines import DeadlineConfig, DeadlineWatch
    from jobsched.services.sweeper import Sweeper, SweeperConfig

    dynamo = dynamo_for(settings, clients.dynamodb, meter)
    notifier = notifier_from_settings(settings, clients, dynamo, metrics=metrics)
    jobs = JobsStore(dynamo, settings.jobs_table)
    grace = timedelta(seconds=settings.sweeper_grace_seconds)
    deadlines = DeadlineWatch(
        config=DeadlineConfig(runs_table=settings.runs_table, marker_ttl=settings.retention, grace=grace),
        dynamo=dynamo,
        jobs=jobs,
        notifier=notifier,
        metrics=metrics,
    )
    return Sweeper(
        config=SweeperConfig(runs_table=settings.runs_table, grace=grace),
        dynamo=dynamo,
        jobs=jobs,
        attempts=AttemptStore(dynamo, settings.runs_table, on_dead_letter=notifier.on_dead_letter),
        queues=run_queues_from_settings(settings, clients, dynamo),
        metrics=metrics,
        notifier=notifier,
        workflows=workflow_engine_from_settings(settings, clients, dynamo),
        ages=QueueAges(dynamo, settings.leases_table),
        deadlines=deadlines,
        stats=RunStatsStore(dynamo, settings.runs_table, settings.retention),
        depths=queue_depths_from_settings(settings, clients, dynamo),
    )


def forecast_service_from_settings(
    settings: Settings, clients: Clients, *, meter: Any = None, config: ForecastConfig | None = None
) -> ForecastService:
    """The forecast (decision 0054) over the deployment's Jobs table (due index) and in-flight ledger."""
    from jobsched.aws.forecast_reads import ForecastReads
    from jobsched.services.forecast import ForecastConfig, ForecastService

    dynamo = dynamo_for(settings, clients.dynamodb, meter)
    reads = ForecastReads(dynamo, settings.jobs_table, dynamo, settings.runs_table)
    return ForecastService(config or ForecastConfig(), reads)


def capacity_service_from_settings(
    settings: Settings,
    clients: Clients,
    capacity: PoolCapacity,
    policy: CapacityPolicy,
    *,
    metrics: obs.MetricSink,
    meter: Any = None,
    forecast: ForecastConfig | None = None,
    ceiling_lease_seconds: float | None = None,
) -> CapacityService:
    """The capacity service (decision 0055): the forecast, the sweeper's queue ages, ``capacity``; with
    fair shares (``JOBSCHED_FAIR_SHARE`` and ``JOBSCHED_TENANT_SLOTS``), the pool ceiling items it
    writes in the Leases table for the shared queues (decision 0057), in force ``ceiling_lease_seconds``
    (default :data:`~jobsched.aws.limits_store.POOL_CEILING_LEASE_SECONDS`) unless renewed."""
    from jobsched.aws.limits_store import POOL_CEILING_LEASE_SECONDS, PoolCeilingItems
    from jobsched.aws.queue_ages import QueueAges
    from jobsched.services.capacity import CapacityConfig, CapacityService

    dynamo = dynamo_for(settings, clients.dynamodb, meter)
    ages = QueueAges(dynamo, settings.leases_table)
    shared = settings.fair_share is not None and bool(settings.tenant_slots)
    ceilings = (
        PoolCeilingItems(dynamo, settings.leases_table, ceiling_lease_seconds or POOL_CEILING_LEASE_SECONDS)
        if shared
        else None
    )
    return CapacityService(
        CapacityConfig(policy),
        forecast_service_from_settings(settings, clients, meter=meter, config=forecast),
        capacity,
        ages.read,
        metrics,
        ceilings=ceilings,
        shared=tuple(settings.tenant_slots) if shared else (),
    )
