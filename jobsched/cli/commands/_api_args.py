"""What every command that talks to the API shares: connection options, output mode, exit codes.

Exit codes: 0 ok, 1 the API answered with an error (or could not be reached), 2 usage or validation
error detected before sending anything. Errors print one line on stderr: ``error: <code>: <message>``;
a ``budget_exhausted`` refusal (a tenant over its monthly budget) adds a ``hint:`` line naming the
commands that show and raise the budget.
"""

from __future__ import annotations

import argparse
import functools
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from jobsched.client import ENV_TOKEN, ENV_URL, ApiClient, ApiError, build_client
from jobsched.core.errors import ValidationError

EXIT_OK = 0
EXIT_API_ERROR = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130  # the shell convention for SIGINT
#: The API's error code for an on-demand run refused by a tenant's spend cap (decision 0062).
BUDGET_EXHAUSTED = "budget_exhausted"
_BUDGET_PATH = re.compile(r"/admin/tenants/([^/\s]+)/budget")


class UsageError(ValidationError):
    """Raised by a command when its arguments are invalid (bad JSON, conflicting flags); exit 2."""

    code = "usage"


def api_options() -> argparse.ArgumentParser:
    """A parent parser with the connection and output options, added to every client command."""
    parent = argparse.ArgumentParser(add_help=False)
    group = parent.add_argument_group("connection")
    group.add_argument("--url", help=f"API base URL (default: ${ENV_URL}, else http://127.0.0.1:8080)")
    group.add_argument("--token", help=f"bearer token of the embedded mode (default: ${ENV_TOKEN})")
    group.add_argument(
        "--sigv4",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="sign requests with AWS SigV4 (default: on for execute-api hosts)",
    )
    group.add_argument("--region", help="AWS region for SigV4 (default: from the host or AWS_REGION)")
    group.add_argument("--profile", help="AWS profile for SigV4 credentials (default: the standard chain)")
    group.add_argument(
        "--request-timeout", type=float, default=30.0, metavar="SECONDS", help="HTTP timeout per request"
    )
    output = parent.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="print the API's JSON instead of a table")
    output.add_argument("-q", "--quiet", action="store_true", help="print only the id(s), for scripts")
    return parent


def client_from_args(args: argparse.Namespace) -> ApiClient:
    """The API client the parsed options describe (flags > environment > defaults)."""
    return build_client(
        args.url,
        token=args.token,
        sigv4=args.sigv4,
        region=args.region,
        profile=args.profile,
        timeout=args.request_timeout,
    )


CommandBody = Callable[[argparse.Namespace, ApiClient], "int | None"]


def command(func: CommandBody) -> Callable[[argparse.Namespace], int]:
    """Wrap a command body: build the client, map errors to one stderr line and an exit code."""

    @functools.wraps(func)
    def run(args: argparse.Namespace) -> int:
        try:
            return func(args, client_from_args(args)) or EXIT_OK
        except ApiError as exc:
            if exc.status == 0 and exc.code in ("bad_url", "no_region"):
                return fail(exc.code, exc.message, EXIT_USAGE)
            code = fail(exc.code, exc.message, EXIT_API_ERROR)
            if exc.code == BUDGET_EXHAUSTED:
                print(budget_hint(exc.message), file=sys.stderr)
            return code
        except ValidationError as exc:
            return fail(exc.code, exc.message, EXIT_USAGE)
        except KeyboardInterrupt:  # Ctrl-C during `runs watch` or a slow request: no traceback
            print(file=sys.stderr)
            return EXIT_INTERRUPTED

    return run


def budget_hint(message: str) -> str:
    """The CLI's way to the budget a ``budget_exhausted`` refusal names (decision 0062)."""
    found = _BUDGET_PATH.search(message)
    tenant = found.group(1) if found else "<tenant>"
    return (
        f"hint: the budget and spend: `jobsched budget`; an administrator raises it with "
        f"`jobsched admin budget set {tenant} <usd>` or clears it with `jobsched admin budget clear {tenant}`"
    )


def fail(code: str, message: str, exit_code: int) -> int:
    print(f"error: {code}: {message}", file=sys.stderr)
    return exit_code


def load_json_arg(value: str, what: str) -> Any:
    """A JSON value given inline (``'{"a": 1}'``) or from a file (``@payload.json``, ``@-`` = stdin)."""
    if value.startswith("@"):
        name = value[1:]
        try:
            text = sys.stdin.read() if name == "-" else Path(name).read_text()
        except OSError as exc:
            raise UsageError(f"{what}: cannot read {name}: {exc.strerror}") from None
    else:
        text = value
    try:
        return json.loads(text)
    except ValueError as exc:
        raise UsageError(f"{what} is not valid JSON: {exc}") from None
