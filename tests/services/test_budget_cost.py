"""What the spend-cap check costs the dispatcher per run (decision 0062), measured by the metering
wrapper (DynamoDB sizing rules) on the in-memory fakes reached as a DynamoDB client, as
tests/services/test_dispatch_cost.py measures the dispatcher: per-minute jobs of one tenant over 30
simulated one-minute ticks of one shard, the same ticks with the check and without it. Run with ``-s``
to print the figures (docs/performance.md, "Spend caps")."""

from __future__ import annotations

from datetime import timedelta

import pytest

from jobsched.aws.usage_store import UsageStore
from jobsched.core.usage import DayUsage
from tests.aws.conftest import T0, provision
from tests.aws.memory import build_pipeline, memory_aws_units  # noqa: F401  (on the fakes)

EVERY_MINUTE = {"schedule": "* * * * *", "target": {"handler": "echo"}, "payload": {"n": 1}}
MINUTES = 30


def _dispatch(aws, *, check: bool, budget: bool, jobs: int) -> tuple[int, dict]:
    """Runs created and the dispatcher's meter over MINUTES ticks of ``jobs`` jobs of tenant acme."""
    aws.settings = provision(aws.clients, prefix=f"b{int(check)}{int(budget)}{jobs}", shards=1)
    p = build_pipeline(aws)
    if budget:  # a budget far above the spend: never capped, so both variants make the same runs
        p.dispatcher.budgets.service.budgets.put("acme", 1_000_000.0, T0)
        for day in ("2026-03-01", "2026-03-02"):  # usage items of the days before today and of today
            UsageStore(p.dispatcher.runs.dynamo, aws.settings.leases_table).add(
                DayUsage(tenant="acme", day=day, run_seconds=10.0)
            )
    if not check:
        p.dispatcher.budgets = None
    for i in range(jobs):
        p.jobs.create("acme", EVERY_MINUTE | {"name": f"j{i}"}, T0 - timedelta(seconds=30))
    p.dispatcher.dispatch_shard(0, T0 - timedelta(seconds=20))
    p.meter.reset()
    runs = sum(p.dispatcher.dispatch_shard(0, T0 + timedelta(minutes=m)).runs_created for m in range(MINUTES))
    return runs, p.meter.snapshot()


@pytest.mark.parametrize("jobs", [1, 20])
@pytest.mark.parametrize("budget", [False, True], ids=["no budget", "budget"])
def test_the_check_costs_one_read_per_tenant_and_minute(aws, budget, jobs):
    # Given the same ticks with the check and without it
    runs, without = _dispatch(aws, check=False, budget=budget, jobs=jobs)
    runs_checked, checked = _dispatch(aws, check=True, budget=budget, jobs=jobs)
    assert runs == runs_checked > 0
    requests = checked["dynamodb"]["requests"] - without["dynamodb"]["requests"]
    rru = checked["dynamodb"]["rcu"] - without["dynamodb"]["rcu"]
    wru = checked["dynamodb"]["wcu"] - without["dynamodb"]["wcu"]
    print(
        f"\n{jobs} per-minute jobs, budget={budget}: {runs} runs over {MINUTES} ticks; the check added "
        f"{requests} requests ({requests / runs:.4f} per run), {rru:.2f} RRU ({rru / runs:.4f} per run), "
        f"{wru:.2f} WRU; USD per million runs: {rru / runs * 0.25:.4f}"
    )
    # Then it adds no write, and at most one read of the budget (and, with a budget, one of the
    # month's usage items) per tick: the ticks that dispatch read the tenant's state once a minute
    assert wru == 0
    assert requests <= MINUTES * (2 if budget else 1)
    # (with a budget: today's usage item each minute, the days before today once an hour)
    assert rru <= MINUTES * (0.5 + (0.5 if budget else 0)) + (0.5 if budget else 0)
