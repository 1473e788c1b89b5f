"""The AWS estimate's arithmetic (jobsched.bench.aws_estimate): worker invocations and their waits,
the early-arrival figures, the Lambda duration of the calls, the totals; and one small simulation
of the real dispatcher before and after the alignment (decision 0032)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from jobsched.bench.aws_estimate import (
    Latency,
    Sent,
    TickConfig,
    call_duration,
    early_arrival,
    estimate,
    estimate_text,
    simulate_variants,
    worker_waits,
)
from jobsched.bench.pricing import US_EAST_1

T = datetime(2026, 3, 2, 12, 5, 0, tzinfo=UTC)
GB_SECOND_USD_PER_MILLION = US_EAST_1.lambda_gb_second * 1_000_000  # 13.3334


def sent(due: float, sent_at: float, delay: int, queue: str = "default") -> Sent:
    """A message due ``due`` s after T, sent ``sent_at`` s after T with ``delay``."""
    return Sent(
        queue=queue, due_at=T + timedelta(seconds=due), sent_at=T + timedelta(seconds=sent_at), delay=delay
    )


def test_records_surfacing_together_are_one_invocation_that_waits_for_the_latest_due():
    # Given two messages sent at T+0.37 with 4 s, due at T+5 and T+5 (surface at T+4.37)
    messages = [sent(5, 0.37, 4), sent(5, 0.37, 4)]
    # When the event source mapping takes them (a receive returns what surfaced within 20 ms)
    waits = worker_waits(messages, receive_seconds=0.02)
    # Then one invocation, received at T+4.39, waiting 0.61 s
    assert len(waits) == 1
    received, wait = waits[0]
    assert received == T + timedelta(seconds=4.39)
    assert wait == pytest.approx(0.61)


def test_an_invocation_takes_at_most_ten_records():
    # Given 12 messages surfacing at the same instant / Then two invocations: 10 and 2 records
    assert len(worker_waits([sent(5, 0.0, 5) for _ in range(12)], receive_seconds=0.02)) == 2


def test_messages_surfacing_further_apart_than_one_receive_are_separate_invocations():
    # Given messages surfacing 50 ms apart on one queue, and one on another queue at the same instant
    messages = [sent(5, 0.30, 4), sent(5, 0.35, 4), sent(5, 0.30, 4, queue="high")]
    # Then three invocations
    assert len(worker_waits(messages, receive_seconds=0.02)) == 3


def test_a_message_that_surfaces_on_time_costs_no_wait():
    # Given a message sent at a whole second with the whole delay (aligned) / Then no wait
    assert worker_waits([sent(5, 1.0, 4)], receive_seconds=0.02)[0][1] == 0.0


def test_early_arrival_prices_the_waits_and_the_alignment_sleep_as_lambda_duration():
    # Given 10 runs early by 0.5 s (one invocation waiting 0.48 s after a 20 ms receive) and 1 s of
    # the dispatcher's alignment sleep over 2 ticks, both functions at 512 MB
    messages = [sent(5, 0.5, 4) for _ in range(10)]
    figures = early_arrival(messages, 1.0, 2, receive_seconds=0.02, worker_mb=512, dispatcher_mb=512)
    # Then per run: 0.48 s x 0.5 GB / 10 runs of worker wait, 1 s x 0.5 GB / 10 of dispatcher sleep
    assert figures["runs"] == 10 and figures["worker_invocations"] == 1
    assert figures["runs_early"] == 10 and figures["early_max_seconds"] == pytest.approx(0.5)
    assert figures["worker_wait_gb_seconds_per_run"] == pytest.approx(0.024)
    assert figures["dispatcher_align_gb_seconds_per_run"] == pytest.approx(0.05)
    assert figures["dispatcher_align_seconds_per_sending_tick"] == pytest.approx(0.5)
    assert figures["usd_worker_wait"] == pytest.approx(0.024 * GB_SECOND_USD_PER_MILLION, abs=1e-4)
    assert figures["usd_per_million_runs"] == pytest.approx(0.074 * GB_SECOND_USD_PER_MILLION, abs=1e-4)


def test_early_arrival_refuses_an_empty_simulation():
    with pytest.raises(ValueError, match="no message"):
        early_arrival([], 0.0, 0, receive_seconds=0.02, worker_mb=512, dispatcher_mb=512)


BREAKDOWN = {
    "worker": {
        "invocations": 0.1,  # 10 records per invocation
        "memory_mb": 512,
        "operations": {
            "dynamodb.UpdateItem": {"requests": 2.0},
            "sqs.ChangeMessageVisibility": {"requests": 0.0},
        },
    },
    "dispatcher": {
        "invocations": 0.04,
        "memory_mb": 512,
        "operations": {"dynamodb.PutItem": {"requests": 1.0}, "sqs.SendMessageBatch": {"requests": 0.1}},
    },
    "event_source_mapping": {"operations": {"sqs.ReceiveMessage": {"requests": 0.1}}},
}


def test_call_duration_is_calls_times_latency_over_the_calls_made_at_once():
    # Given 5 ms a DynamoDB call and 20 ms an SQS call, a tick writing one job at a time
    figures = call_duration(
        BREAKDOWN, Latency(dynamodb=0.005, sqs=0.020), worker_concurrency=10, dispatch_concurrency=1
    )
    worker, dispatcher = figures["functions"]["worker"], figures["functions"]["dispatcher"]
    # Then the worker: 20 DynamoDB calls an invocation over 10 records at once = 10 ms;
    # 0.1 invocations x 0.01 s x 0.5 GB = 0.0005 GB-s per run
    assert worker["dynamodb_calls_per_invocation"] == 20 and worker["ms_per_invocation"] == pytest.approx(
        10.0
    )
    assert worker["gb_seconds_per_run"] == pytest.approx(0.0005)
    # ... the dispatcher: 25 DynamoDB + 2.5 SQS calls one after the other = 175 ms; 0.04 x 0.175 x 0.5
    assert dispatcher["ms_per_invocation"] == pytest.approx(175.0)
    assert dispatcher["gb_seconds_per_run"] == pytest.approx(0.0035)
    # ... the event source mapping is no Lambda function
    assert "event_source_mapping" not in figures["functions"]
    assert figures["usd_per_million_runs"] == pytest.approx(0.004 * GB_SECOND_USD_PER_MILLION, abs=1e-4)


def test_a_tick_writing_eight_jobs_at_once_divides_its_puts_and_sends_by_eight():
    # Given the deployed dispatch_concurrency 8 / Then the puts and the sends take an eighth: 21.875 ms
    figures = call_duration(BREAKDOWN, Latency(), worker_concurrency=10, dispatch_concurrency=8)
    assert figures["functions"]["dispatcher"]["ms_per_invocation"] == pytest.approx(
        25 * 5 / 8 + 2.5 * 20 / 8, abs=0.01
    )


def test_the_sweepers_run_queries_go_eight_at_a_time_after_its_ledger_queries():
    # Given a sweep making 4 ledger Queries, then 40 Queries of its jobs' runs and one BatchGetItem
    breakdown = {
        "sweeper": {
            "invocations": 0.01,
            "memory_mb": 256,
            "operations": {
                "dynamodb.Query": {"requests": 0.44},
                "dynamodb.BatchGetItem": {"requests": 0.01},
            },
        }
    }
    figures = call_duration(breakdown, Latency(dynamodb=0.005, sqs=0.020), worker_concurrency=10)
    # Then the ledger's 4 one after the other, the runs' 40 eight at a time, the batch alone:
    # (4 + 40 / 8 + 1) x 5 ms = 50 ms
    assert figures["functions"]["sweeper"]["ms_per_invocation"] == pytest.approx(50.0)


def test_the_estimate_adds_the_measured_requests_the_calls_and_each_variants_early_arrival():
    # Given the pipeline's request-priced lines and two variants' early-arrival figures
    pipeline = {
        "usd_breakdown_per_million_runs": {
            "dynamodb_writes": 2.0,
            "dynamodb_reads": 0.1,
            "sqs": 0.12,
            "lambda_requests": 0.03,
            "lambda_duration": 0.5,  # moto's emulation: replaced by the model
        },
        "breakdown": BREAKDOWN,
        "duplicates": 0,
        "lost": 0,
    }
    variants = {"before": {"usd_per_million_runs": 0.3}, "after": {"usd_per_million_runs": 0.02}}
    figures = estimate(pipeline, variants, Latency(), worker_concurrency=10)
    # Then each total = 2.25 (requests) + the calls' duration + the variant's early arrival
    calls = figures["lambda_duration_calls"]["usd_per_million_runs"]
    assert figures["request_priced"] == pytest.approx(2.25)
    assert figures["usd_per_million_runs"]["before"] == pytest.approx(2.25 + calls + 0.3, abs=1e-4)
    assert figures["usd_per_million_runs"]["after"] == pytest.approx(2.25 + calls + 0.02, abs=1e-4)
    assert figures["goal_met"] is (figures["usd_per_million_runs"]["after"] <= 2.60)
    assert figures["latency_ms"] == {"dynamodb": 5.0, "sqs": 20.0}


def test_the_real_dispatcher_lands_no_run_early_once_aligned():
    """Given 4 per-minute jobs over 2 shards, created a minute apart, ticks at seeded sub-second offsets
    for 19 minutes (a job's creation queues 15 minutes of runs; the ticks send from its first advance
    on, so 4 ticks send)
    When the real dispatcher ticks with the alignment off (before) and on (after)
    Then before, runs surface early (the worker waits); after, none does, none is
    more than the 100 ms margin late, and the dispatcher slept instead, under a second a sending tick"""
    variants, setup = simulate_variants(TickConfig(jobs=4, minutes=19, shards=2, stagger_minutes=4))
    before, after = variants["before"], variants["after"]
    assert before["runs"] == after["runs"] > 0
    assert before["runs_early"] > 0 and before["usd_worker_wait"] > 0
    assert before["dispatcher_align_seconds_per_sending_tick"] == 0
    assert after["runs_early"] == 0 and after["usd_worker_wait"] == 0
    assert after["late_max_seconds"] <= 0.1
    assert 0 < after["dispatcher_align_seconds_per_sending_tick"] < 1.0
    assert setup["ticks"] == 38 and setup["seed"] == 12
    assert before["ticks_sending"] == after["ticks_sending"] == 4
    text = estimate_text(
        estimate(
            {
                "usd_breakdown_per_million_runs": {
                    "dynamodb_writes": 2.0,
                    "dynamodb_reads": 0.1,
                    "sqs": 0.1,
                    "lambda_requests": 0.03,
                },
                "breakdown": BREAKDOWN,
                "duplicates": 0,
                "lost": 0,
            },
            variants,
            Latency(),
        )
    )
    assert "AWS estimate" in text and "early arrival before" in text and "early arrival after" in text


def test_the_estimate_prices_the_same_runs_on_the_container_pool():
    # Given the pipeline above, its worker calls modelled (0.0005 GB-s a run at 512 MB = 1 ms) and an
    # early-arrival wait of 0.0005 GB-s a run (1 ms more)
    from jobsched.bench.container_cost import Task, pool_estimate, run_cost

    pipeline = {
        "usd_breakdown_per_million_runs": {
            "dynamodb_writes": 2.0,
            "dynamodb_reads": 0.1,
            "sqs": 0.12,
            "lambda_requests": 0.03,
        },
        "breakdown": BREAKDOWN,
    }
    calls = call_duration(BREAKDOWN, Latency(dynamodb=0.005, sqs=0.020), worker_concurrency=10)
    pool = pool_estimate(pipeline, calls, 0.0005)
    # Then the worker's 0.1 invocations a run no longer pay Lambda's request charge (0.02 of 0.03 per
    # million), the dispatcher keeps its Lambda duration, and the worker's 2 ms a run are a busy task's
    worker_requests = 0.1 * 0.20
    assert pool["request_priced"] == pytest.approx(2.0 + 0.1 + 0.12 + 0.03 - worker_requests)
    assert pool["fargate_busy_seconds_per_run"] == pytest.approx(0.002)
    assert pool["fargate_usd_per_million_runs"] == pytest.approx(
        run_cost(0.002, Task()) * 1_000_000, abs=1e-4
    )
    dispatcher_usd = calls["functions"]["dispatcher"]["gb_seconds_per_run"] * GB_SECOND_USD_PER_MILLION
    assert pool["other_functions_lambda_duration"] == pytest.approx(dispatcher_usd, abs=1e-4)
    assert pool["usd_per_million_runs"] == pytest.approx(
        pool["request_priced"] + dispatcher_usd + pool["fargate_usd_per_million_runs"], abs=2e-4
    )
    assert pool["idle_usd_per_month"] == 0.70
    assert pool["burst_overhead_usd_per_task"] > 0
