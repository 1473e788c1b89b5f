"""AWS list prices (us-east-1): one price sheet for the benchmark's cost figures and the usage
estimates per tenant (:mod:`jobsched.core.usage`). Pure."""

from __future__ import annotations

from dataclasses import dataclass

MILLION = 1_000_000
HOUR = 3600


@dataclass(frozen=True)
class Prices:
    """Unit prices in USD; the defaults are us-east-1 list prices (DynamoDB on-demand, SQS, Lambda arm64,
    Step Functions standard workflows, SNS standard topics, Fargate Linux on-demand arm64)."""

    dynamodb_wru: float = 0.625 / MILLION
    dynamodb_rru: float = 0.125 / MILLION
    sqs_request: float = 0.40 / MILLION
    lambda_request: float = 0.20 / MILLION
    lambda_gb_second: float = 0.0000133334
    #: Step Functions standard workflows: $0.025 per 1,000 state transitions.
    sfn_transition: float = 0.025 / 1000
    #: SNS standard topics: $0.50 per million publish requests, each started 64 KB of a message one
    #: request (deliveries to the topic's subscribers are priced by protocol and are not counted).
    sns_publish: float = 0.50 / MILLION
    #: Fargate, Linux/ARM (Graviton), on demand: $0.03238 per vCPU-hour, $0.00356 per GB-hour.
    fargate_vcpu_second: float = 0.03238 / HOUR
    fargate_gb_second: float = 0.00356 / HOUR


US_EAST_1 = Prices()
#: Fargate Linux/x86 on demand in us-east-1 (the stack deploys arm64; for comparison and other stacks).
FARGATE_X86_VCPU_SECOND = 0.04048 / HOUR
FARGATE_X86_GB_SECOND = 0.004445 / HOUR
