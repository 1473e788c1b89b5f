"""Request and response models of the limit routes: per-tenant limits (admin) and usage."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, model_validator

from jobsched.api.schemas import JsonInt, _In


class TenantLimitIn(_In):
    """``PUT /admin/tenants/{tenant}/limits``: the tenant's own limits (an absent or null field: the
    deployment's default for that limit)."""

    max_running: JsonInt | None = Field(
        default=None, ge=1, le=1000, description="the tenant's runs executing at once"
    )
    runs_per_second: float | None = Field(
        default=None, ge=0.001, le=1000, description="the tenant's runs started per second"
    )
    burst: JsonInt | None = Field(
        default=None, ge=1, le=1000, description="runs that may start at once (default 1)"
    )

    @model_validator(mode="after")
    def _something(self) -> TenantLimitIn:
        if self.max_running is None and self.runs_per_second is None:
            raise ValueError("give max_running and/or runs_per_second (DELETE goes back to the defaults)")
        if self.burst is not None and self.runs_per_second is None:
            raise ValueError("burst needs runs_per_second")
        return self


Source = Literal["tenant", "default"]


class TenantLimitOut(BaseModel):
    tenant: str
    max_running: int | None = Field(description="runs executing at once (null: no limit)")
    runs_per_second: float | None = Field(description="runs started per second (null: no limit)")
    burst: int | None = Field(description="runs that may start at once (null when there is no rate)")
    source: dict[str, Source] = Field(
        description="per limit, whether the tenant's own value or the deployment's default applies"
    )


class TenantLimitList(BaseModel):
    items: list[TenantLimitOut] = Field(description="tenants with limits of their own, by tenant")
    defaults: dict[str, float | int | None] = Field(
        description="the deployment's defaults: max_running, runs_per_second, burst (null: no limit)"
    )
    next_cursor: None = None


class DayUsageOut(BaseModel):
    tenant: str = Field(
        description='the tenant; "@deployment" (administrators only): what serves no tenant, the '
        "capacity function and the event source mappings' empty polls"
    )
    day: str = Field(description="the UTC day, YYYY-MM-DD")
    runs_started: int = Field(
        description="attempts the workers executed a handler for, and chunked runs they started; "
        "each ends as one of runs_succeeded, runs_failed, runs_cancelled"
    )
    runs_succeeded: int
    runs_failed: int = Field(
        description="failed attempts: retried, dead-lettered, or lost (their lease taken over)"
    )
    runs_cancelled: int = Field(description="started attempts that ended cancelled")
    runs_dead_lettered: int = Field(description="runs the workers dead-lettered")
    run_seconds: float = Field(description="seconds the tenant's handlers ran")
    throttled_waits: int = Field(description="deliveries held back by a concurrency or rate limit")
    wru: float = Field(
        description="DynamoDB write request units of the worker's, the dispatcher's, the sweeper's and "
        "the API's requests for the tenant, plus its share of their requests made for no one tenant"
    )
    rru: float = Field(description="DynamoDB read request units, likewise")
    sqs_requests: float = Field(
        description="SQS requests (per 64 KiB), likewise, the event source mapping's receive and delete "
        "of the worker's batches included"
    )
    lambda_gb_seconds: float = Field(
        description="the tenant's share of those functions' billed Lambda duration, in GB-seconds"
    )
    lambda_requests: float = Field(description="the tenant's share of those functions' invocations")
    sfn_transitions: float = Field(
        description="Step Functions state transitions of the tenant's chunked runs (each state entered, "
        "each retry of a task)"
    )
    sns_publishes: float = Field(
        description="SNS publishes made for the tenant (dead-letter notifications, deadline alerts, "
        "budget warnings), one per started 64 KB"
    )
    fargate_vcpu_seconds: float = Field(
        description="vCPU-seconds of the container pool's Fargate tasks: each task's seconds split "
        "between the runs it held at once, the idle ones shared like requests for no one tenant"
    )
    fargate_gb_seconds: float = Field(description="GB-seconds of those tasks, likewise")
    estimated_usd: float = Field(
        description="wru, rru, sqs_requests, lambda_requests, lambda_gb_seconds, sfn_transitions, "
        "sns_publishes and the Fargate seconds (arm64) at us-east-1 list prices (a day counted before "
        "lambda_gb_seconds existed: run_seconds as Lambda duration at the worker's memory)"
    )


class UsageOut(BaseModel):
    items: list[DayUsageOut] = Field(description="one per tenant and day with any usage, by day then tenant")
    first_day: str = Field(description="the first day asked for (from)")
    last_day: str = Field(description="the last day asked for (to)")
    next_cursor: None = None


class BudgetIn(_In):
    """``PUT /admin/tenants/{tenant}/budget``: the tenant's monthly budget."""

    monthly_usd: float = Field(
        ge=0.000001,
        le=1_000_000_000,
        allow_inf_nan=False,
        description="the tenant's budget per UTC month, in USD (its usage's estimated_usd)",
    )


class BudgetOut(BaseModel):
    tenant: str
    month: str = Field(description="the UTC month the spend is of, YYYY-MM")
    monthly_usd: float | None = Field(description="the budget in USD (null: none set)")
    spent_usd: float = Field(description="the month-to-date estimated_usd of the tenant's usage items")
    percent_used: float | None = Field(description="spent / budget x 100 (null without a budget)")
    state: Literal["none", "ok", "warning", "capped"] = Field(
        description="none: no budget; ok: under 80 %; warning: 80 % or more (owners notified once a "
        "month); capped: 100 % or more (new runs recorded skipped, reason budget)"
    )


class BudgetList(BaseModel):
    items: list[BudgetOut] = Field(description="tenants with a budget, by tenant")
    next_cursor: None = None
