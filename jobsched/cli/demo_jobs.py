"""The demo jobs ``jobsched dev`` registers (unless ``--no-demo``): what ``make run`` shows.

They are created through the real API with the tenant's token -- the same path a user takes -- so
the demo exercises the API, the dispatcher, the queues and the worker end to end.
"""

from __future__ import annotations

from typing import Any

from jobsched.client import ApiClient

DEMO_JOBS: tuple[dict[str, Any], ...] = (
    {
        "name": "demo.echo",
        "description": "every minute: returns its payload",
        "schedule": "* * * * *",
        "target": {"handler": "demo.echo"},
        "payload": {"message": "hello from jobsched"},
    },
    {
        "name": "demo.flaky",
        "description": "every 2 minutes: fails once (retryable), then succeeds on the retry",
        "schedule": "*/2 * * * *",
        "target": {"handler": "demo.flaky"},
        "payload": {"failures": 1},
        "retry": {"max_attempts": 3, "base_seconds": 1, "max_seconds": 5},
    },
    {
        "name": "demo.sleep",
        "description": "every 10 seconds: sleeps 2 s, heartbeating",
        "schedule": "*/10 * * * * *",
        "target": {"handler": "demo.sleep"},
        "payload": {"seconds": 2},
        "timeout_seconds": 30,
    },
)


def register_demo_jobs(api_url: str, token: str) -> list[dict[str, Any]]:
    """Create every demo job through the API at ``api_url``; returns the created jobs."""
    client = ApiClient(api_url, token=token, user_agent="jobsched-dev")
    return [client.create_job(spec) for spec in DEMO_JOBS]
