"""Moved: the API client is :mod:`jobsched.client` (this name stays for scripts written against it)."""

from jobsched.client import (
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
