"""The jobsched API's HTTP client: what the ``jobsched`` CLI, the benchmarks and your scripts call.

``build_client()`` reads ``JOBSCHED_URL`` / ``JOBSCHED_TOKEN`` (or signs with SigV4 for an
``execute-api`` URL); every API error raises :class:`ApiError` with ``status``, ``code`` and
``message`` (docs/cli.md, "From Python"). Development- and user-side code: the Lambda functions never
import it, and the asset leaves it out (``infra/bundling.py`` ``DEV_ONLY``).
"""

from jobsched.client.api_client import (
    DEFAULT_TIMEOUT_SECONDS,
    DEFAULT_URL,
    ENV_TOKEN,
    ENV_URL,
    SIGV4_SERVICE,
    ApiClient,
    ApiError,
    SigV4Signer,
    build_client,
    is_backfill,
    region_from_host,
)

__all__ = [
    "DEFAULT_TIMEOUT_SECONDS",
    "DEFAULT_URL",
    "ENV_TOKEN",
    "ENV_URL",
    "SIGV4_SERVICE",
    "ApiClient",
    "ApiError",
    "SigV4Signer",
    "build_client",
    "is_backfill",
    "region_from_host",
]
