"""AWS list prices (us-east-1): one price sheet for the benchmark's cost figures and the usage
estimates per tenant (:mod:`jobsched.core.usage`). Pure."""

from __future__ import annotations

from dataclasses import dataclass

MILLION = 1_000_000


@dataclass(frozen=True)
class Prices:
    """Unit prices in USD; the defaults are us-east-1 list prices (DynamoDB on-demand, SQS, Lambda arm64)."""

    dynamodb_wru: float = 0.625 / MILLION
    dynamodb_rru: float = 0.125 / MILLION
    sqs_request: float = 0.40 / MILLION
    lambda_request: float = 0.20 / MILLION
    lambda_gb_second: float = 0.0000133334


US_EAST_1 = Prices()
