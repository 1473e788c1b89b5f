"""What the adapters raise when an AWS call fails: the one place botocore's errors are translated.

Services, long jobs, the API and targets never import botocore (an import-linter contract): they
catch these. Every adapter call goes through :func:`aws_call`, which turns a ``ClientError`` (the
service answered with an error code) into :class:`AwsRefused` and a ``BotoCoreError`` (no answer:
connection, timeout, bad parameters) into :class:`AwsUnreachable`. A refused condition is not an
error of this tree: a conditional write raises :class:`jobsched.ports.tables.ConditionFailed` with the
stored item.

Both classes also derive from the botocore class they replace, so code outside the product's rooms
(the embedded mode, the benchmarks, older tests) that still catches ``ClientError`` or
``BotoCoreError`` sees the same error. Neither derives from :class:`jobsched.core.errors.JobschedError`:
they are failures, not answers the library gives on purpose, and the API answers them as before (500,
the request id in the logs); the worker classifies them by their code
(:func:`jobsched.core.retry.classify_error`: throttling retryable, access denied permanent).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from botocore.exceptions import BotoCoreError, ClientError

T = TypeVar("T")


class AwsError(Exception):
    """Root of the errors an adapter raises when an AWS call fails; ``code`` is AWS's error code
    (``""`` when there was no answer) and ``operation`` the API operation (``PutItem``...)."""

    code: str = ""
    operation: str = ""


class AwsRefused(AwsError, ClientError):
    """Raised when AWS answered a call with an error (throttling, access denied, a missing resource,
    a token Step Functions no longer knows). ``response`` is botocore's error response."""

    def __init__(self, error_response: dict[str, Any], operation_name: str):
        ClientError.__init__(self, error_response, operation_name)
        self.code = str(error_response.get("Error", {}).get("Code", ""))
        self.operation = operation_name

    @property
    def message(self) -> str:
        return str(self.response.get("Error", {}).get("Message", ""))


class AwsUnreachable(AwsError, BotoCoreError):
    """Raised when an AWS call got no answer (connection refused or reset, read timeout) or could not
    be made (botocore refused its parameters). ``cause`` is the botocore error."""

    fmt = "{detail}"

    def __init__(self, detail: str, cause: BaseException | None = None):
        BotoCoreError.__init__(self, detail=detail)
        self.cause = cause

    def __reduce__(self) -> Any:
        return AwsUnreachable, (str(self),)


def is_sdk_client(obj: Any) -> bool:
    """Whether ``obj`` is a boto3 client (or a :class:`jobsched.aws.clients.ClientOnFirstUse` standing
    in for one), told without reading an attribute of it: reading one would create a lazy client."""
    from botocore.client import BaseClient

    from jobsched.aws.clients import ClientOnFirstUse

    return isinstance(obj, BaseClient | ClientOnFirstUse)


def refused(code: str, message: str, operation: str) -> AwsRefused:
    """An :class:`AwsRefused` made by an adapter itself (e.g. a batch left unprocessed 8 times)."""
    return AwsRefused({"Error": {"Code": code, "Message": message}}, operation)


def translate(exc: BaseException) -> BaseException:
    """The error of this tree for a botocore error; any other exception as it is."""
    if isinstance(exc, AwsError):
        return exc
    if isinstance(exc, ClientError):
        return AwsRefused(exc.response, exc.operation_name)
    if isinstance(exc, BotoCoreError):
        return AwsUnreachable(f"{type(exc).__name__}: {exc}", exc)
    return exc


def aws_call(fn: Callable[..., T], /, **kwargs: Any) -> T:
    """``fn(**kwargs)`` (a boto3 client method) with botocore's errors translated into this tree."""
    try:
        return fn(**kwargs)
    except (ClientError, BotoCoreError) as exc:
        translated = translate(exc)
        if translated is exc:
            raise
        raise translated from exc
