"""Human-readable tables of the benchmark figures (the JSON form is the dicts themselves)."""

from __future__ import annotations

from typing import Any


def _fmt(value: Any, digits: int = 4) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}".rstrip("0").rstrip(".") if value else "0"
    return str(value)


def pipeline_text(figures: dict[str, Any]) -> str:
    """The pipeline benchmark as a short report: outcome, per-run units, dollars, per-function breakdown."""
    setup = figures["setup"]
    lines = [
        f"run pipeline: {figures['runs']} runs ({setup['jobs']} jobs x {setup['minutes']} minutes, "
        f"'{setup['schedule']}', {setup['payload_bytes']} B payload, handler {setup['handler']}, "
        f"{setup['shards']} shards) "
        f"in {setup['elapsed_seconds']} s",
        f"  succeeded {figures['succeeded']}   duplicates {figures['duplicates']}   lost {figures['lost']}",
        f"  per successful run: {_fmt(figures['wru'])} WRU, {_fmt(figures['rru'])} RRU, "
        f"{_fmt(figures['sqs_requests'])} SQS requests, "
        f"{_fmt(figures['lambda_invocations'])} Lambda invocations, "
        f"{_fmt(figures['lambda_gb_seconds'], 6)} GB-s",
    ]
    usd = figures.get("usd_breakdown_per_million_runs") or {}
    if usd:
        lines.append(
            f"  USD per million runs: {_fmt(usd['total'], 3)}  "
            f"(goal <= {figures['goal_usd_per_million_runs']:.2f}: "
            f"{'met' if figures['goal_met'] else 'NOT met'})"
        )
        for name in ("dynamodb_writes", "dynamodb_reads", "sqs", "lambda_requests", "lambda_duration"):
            lines.append(f"    {name:<18} {usd[name]:>8.3f}")
    counted = figures.get("usage_attribution") or {}
    if counted.get("difference_pct") is not None:
        lines.append(
            f"  usage per tenant (decision 0059): tenants' estimated_usd "
            f"{_fmt(counted['tenants_usd_per_million_runs'], 3)} against measured "
            f"{_fmt(counted['measured_usd_per_million_runs'], 3)} per million runs: "
            f"{counted['difference_pct']:+.3f} % (within {counted['tolerance_pct']} %); counting raises "
            f"the cost per run by {_fmt(counted['counting_raise_pct'], 3)} % (at most "
            f"{counted['raise_limit_pct']} %); the deployment row (estimated empty polls, not in the "
            f"measured total) {_fmt(counted.get('deployment_usd_per_million_runs', 0.0), 3)}"
        )
    for name, variant in (figures.get("variants") or {}).items():
        lines.append(
            f"  variant {name} (handler {variant['handler']}): {_fmt(variant['wru'])} WRU per run, "
            f"USD per million runs {_fmt(variant['usd_per_million_runs'], 3)}; succeeded "
            f"{variant['succeeded']}, duplicates {variant['duplicates']}, lost {variant['lost']}"
        )
    lines.append("  per successful run, by function and operation:")
    lines.append(f"    {'function / operation':<38} {'requests':>9} {'WRU':>8} {'RRU':>8}")
    for function, entry in figures["breakdown"].items():
        extra = ""
        if "invocations" in entry:
            extra = (
                f"  ({entry['invocations']} invocations, {entry['handler_ms_per_invocation']} ms each "
                f"at {entry['memory_mb']} MB)"
            )
        lines.append(f"    {function}{extra}")
        for op, use in entry["operations"].items():
            lines.append(
                f"      {op:<36} {_fmt(use['requests']):>9} {_fmt(use['wru']):>8} {_fmt(use['rru']):>8}"
            )
    return "\n".join(lines)


def lag_text(figures: dict[str, Any]) -> str:
    """The lag benchmark as two lines."""
    return "\n".join(
        [
            f"embedded-mode schedule lag: {figures['runs']} runs due at the same second, "
            f"{figures['started']} started",
            f"  start - due: p50 {_fmt(figures['p50_seconds'], 3)} s   "
            f"p99 {_fmt(figures['p99_seconds'], 3)} s   "
            f"max {_fmt(figures['max_seconds'], 3)} s   (goal p99 < {figures['goal_p99_seconds']} s: "
            f"{'met' if figures['goal_met'] else 'NOT met'})",
        ]
    )


def noisy_text(figures: dict[str, Any]) -> str:
    """The noisy-neighbour benchmark: the quiet tenant's lag with fair queues and without."""
    lines = [
        f"noisy neighbour: a burst of {figures['burst_runs']} runs ({figures['handler']}) on 'default' "
        f"({figures['worker_slots_default']} slots x {figures['batch_size']}), quiet tenant triggers "
        f"{figures['quiet_runs']} runs every {figures['quiet_interval_seconds']} s",
    ]
    for name in ("fair", "fifo"):
        m = figures[name]
        lines.append(
            f"  {name:<4}  quiet lag p50 {_fmt(m['quiet_p50_seconds'], 3)} s   "
            f"p99 {_fmt(m['quiet_p99_seconds'], 3)} s   max {_fmt(m['quiet_max_seconds'], 3)} s   "
            f"({m['quiet_during_burst']} of {m['quiet_runs']} during the burst; burst drained in "
            f"{_fmt(m['noisy_drain_seconds'], 1)} s)"
        )
    lines.append(
        f"  goal: quiet p99 < {figures['goal_p99_seconds']} s with fair queues: "
        f"{'met' if figures['goal_met'] else 'NOT met'}"
    )
    return "\n".join(lines)


def noisy_long_text(figures: dict[str, Any]) -> str:
    """The long-run variant (decision 0057): the quiet tenant's lag and the burst's drain, with the fair
    share and without, in the embedded mode (measured) and in the model (deterministic)."""
    lines = [
        f"noisy neighbour, long runs: a burst of {figures['burst_runs']} runs of demo.sleep "
        f"{figures['run_seconds']} s on 'default' (one tenant {figures['tenant_slots_default']} slots, "
        f"{figures['pool_slots_default']} with the share {figures['fair_share']}; "
        f"x {figures['batch_size']}), "
        f"quiet tenant triggers {figures['quiet_runs']} runs every {figures['quiet_interval_seconds']} s",
    ]
    for name in ("share", "no_share"):
        m = figures[name]
        lines.append(
            f"  {name:<8}  quiet lag p50 {_fmt(m['quiet_p50_seconds'], 3)} s   p99 "
            f"{_fmt(m['quiet_p99_seconds'], 3)} s   max {_fmt(m['quiet_max_seconds'], 3)} s   "
            f"({m['quiet_during_burst']} during the burst); burst's last start after "
            f"{_fmt(m['noisy_drain_seconds'], 1)} s   (load {m['load_average_1m']})"
        )
    for name in ("share_alone", "no_share_alone"):
        m = figures[name]
        lines.append(
            f"  {name:<14}  burst alone: last start after {_fmt(m['noisy_drain_seconds'], 1)} s, "
            f"starts spanning {_fmt(m['noisy_start_span_seconds'], 1)} s   (load {m['load_average_1m']})"
        )
    model = figures.get("model")
    if model:
        lines.append(f"  model (Lambda's SQS scaling, {model['slots']} slots a tenant, deterministic):")
        for name in ("share", "no_share", "share_alone", "no_share_alone"):
            m = model[name]
            lines.append(
                f"    {name:<14}  ceiling {m['pool_ceiling']}   "
                f"quiet p50 {_fmt(m['quiet_p50_seconds'], 3)} s   p99 {_fmt(m['quiet_p99_seconds'], 3)} s   "
                f"drained after {_fmt(m['noisy_drain_seconds'], 1)} s   "
                f"refused batches {m['refused_batches']}"
            )
    ratio = figures["alone_span_ratio"]
    alone = "? (no lone span, or a zero one, to compare)" if ratio is None else f"{_fmt(ratio, 3)}x"
    lines.append(
        f"  goal: quiet p99 < {figures['goal_p99_seconds']} s with the share (embedded): "
        f"{'met' if figures['quiet_goal_met'] else 'NOT met'}; the burst alone with the share spans "
        f"{alone} its span without (at most {figures['alone_span_ratio_limit']}x): "
        f"{'met' if figures['alone_goal_met'] else 'NOT met'}; "
        f"both: {'met' if figures['goal_met'] else 'NOT met'}"
    )
    return "\n".join(lines)


def idle_text(figures: dict[str, Any]) -> str:
    """The idle figure: what registered jobs add to a day of ticks and sweeps, and the stack's own cost."""
    per = figures["per_million_jobs"]
    stack = figures["stack"]
    storage = figures["storage"]
    extra = figures["extra_requests_per_day"] or "none"
    return "\n".join(
        [
            f"idle jobs: {figures['jobs']} monthly crons ('{figures['schedule']}'), "
            f"{figures['shards']} shards, {figures['ticks_per_day']} ticks and "
            f"{figures['sweeps_per_day']} sweeps per simulated day",
            f"  requests the jobs added to the day: {extra}",
            f"  per million idle jobs per month: {_fmt(per['requests_per_month'])} requests, "
            f"USD {_fmt(per['usd_requests_per_month'], 4)} in requests (goal <= "
            f"{figures['goal_usd_per_million_jobs_per_month']:.2f}: "
            f"{'met' if figures['goal_met'] else 'NOT met'}); storage USD "
            f"{_fmt(storage['usd_per_million_jobs_per_month'], 4)} ({storage['bytes_per_job']} B per job)",
            f"  the stack itself, whatever the jobs: {_fmt(stack['requests_per_month'])} requests, "
            f"USD {_fmt(stack['usd_requests_per_month'], 4)} per month in requests",
        ]
    )
