"""``jobsched worker --pool container``: the container worker loop, against whatever the environment names.

The loop (:mod:`jobsched.compose.container_worker`) reads the same ``JOBSCHED_*`` variables the stack
sets on the worker function (the tables, the queues, the bucket, the handler modules...:
:meth:`jobsched.runtime.settings.Settings.from_env`, which names a missing one) and the usual AWS SDK
ones (region, credentials, ``AWS_ENDPOINT_URL``). It is the container image's command on ECS Fargate,
the process ``jobsched dev`` starts for the container pool, and what a Deployment runs on a user's
own Kubernetes (docs/container-worker.md). SIGTERM or SIGINT stops it gracefully (exit 0); a second
signal hands its runs back at once.
"""

from __future__ import annotations

import argparse
import os
import sys

from jobsched.cli.commands._process import bounded, on_stop_signals
from jobsched.runtime import resources

#: The pools a process can consume: only the container pool (the Lambda pools are consumed by Lambda).
PROCESS_POOLS = (resources.CONTAINER_KIND,)
#: The IAM recorder's directory variable (jobsched.local.iam.recorder.ENV_CALLS_DIR): set in the tests
#: and the embedded mode only, so the recorder (development code) is imported only then.
ENV_IAM_CALLS_DIR = "IAM_CALLS_DIR"


def register(subparsers: argparse._SubParsersAction) -> None:
    from jobsched.compose.container_worker import (
        DEFAULT_CONCURRENCY,
        DEFAULT_LEASE_SECONDS,
        DEFAULT_STOP_TIMEOUT_SECONDS,
        MAX_LEASE_SECONDS,
        MIN_LEASE_SECONDS,
        POLL_WAIT_SECONDS,
    )

    parser = subparsers.add_parser(
        "worker",
        help="run the container worker loop (the container pool) on the deployment the environment names",
        description=(
            "Consume the container queue and run its runs through the worker path, until SIGTERM or "
            "SIGINT: then stop receiving, let the runs in progress finish within --stop-timeout and hand "
            "the rest back to the queue. Configured by the JOBSCHED_* variables the stack sets on the "
            "worker function (docs/container-worker.md)."
        ),
    )
    parser.add_argument(
        "--pool",
        required=True,
        choices=PROCESS_POOLS,
        help="the pool to consume (only `container`: the Lambda pools are consumed by Lambda)",
    )
    parser.add_argument(
        "--concurrency",
        type=bounded(int, 1, 1000),
        default=DEFAULT_CONCURRENCY,
        metavar="N",
        help="runs handled at once, 1..1000 (default %(default)s)",
    )
    parser.add_argument(
        "--stop-timeout",
        type=bounded(float, 0, 3600, "seconds"),
        default=DEFAULT_STOP_TIMEOUT_SECONDS,
        metavar="SECONDS",
        help="on SIGTERM, how long runs in progress may take to finish before they are handed back "
        "(default %(default)s; keep it under ECS's stopTimeout, at most 120)",
    )
    parser.add_argument(
        "--wait-seconds",
        type=bounded(int, 0, 20, "seconds"),
        default=POLL_WAIT_SECONDS,
        metavar="SECONDS",
        help="the receives' long poll, 0..20 (default %(default)s); a stop waits for the one in flight "
        "within --stop-timeout, so keep it shorter",
    )
    parser.add_argument(
        "--lease-seconds",
        type=bounded(float, MIN_LEASE_SECONDS, MAX_LEASE_SECONDS, "seconds"),
        default=DEFAULT_LEASE_SECONDS,
        metavar="SECONDS",
        help=f"each run's lease, {MIN_LEASE_SECONDS:g}..{MAX_LEASE_SECONDS:g} (default %(default)s), "
        "renewed by a heartbeat every third of it: after a SIGKILL the task's runs are taken over once "
        "it expires",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Build the loop from the environment and run it until a signal; 0 after a graceful stop."""
    from jobsched.aws.clients import Clients
    from jobsched.compose.container_worker import LoopConfig, container_worker_from_settings, logger
    from jobsched.runtime import observability as obs
    from jobsched.runtime.settings import ConfigurationError, Settings

    if os.getcwd() not in sys.path:  # JOBSCHED_HANDLER_MODULES may name the working directory's modules
        sys.path.insert(0, os.getcwd())
    try:
        settings = Settings.from_env()
    except ConfigurationError as exc:  # as main() prints a ValidationError, exit status 2
        hint = "docs/container-worker.md lists the variables"
        print(f"error: {exc.code}: {exc.message} ({hint})", file=sys.stderr)
        return 2
    if os.environ.get(ENV_IAM_CALLS_DIR):  # before the logging: it imports the functions, which set theirs
        from jobsched.local.iam import recorder

        recorder.install_from_env()
    obs.configure_function_logging(obs.make_logger("jobsched-container-worker"))
    config = LoopConfig(
        concurrency=args.concurrency,
        stop_timeout_seconds=args.stop_timeout,
        wait_seconds=args.wait_seconds,
        lease_seconds=args.lease_seconds,
    )
    try:
        loop = container_worker_from_settings(settings, Clients(), config=config)
    except ConfigurationError as exc:  # the task size's variables (usage), as the settings' above
        print(
            f"error: {exc.code}: {exc.message} (docs/container-worker.md lists the variables)",
            file=sys.stderr,
        )
        return 2
    restore = on_stop_signals(loop.request_stop)
    try:
        code = loop.run()
    finally:
        restore()
    logger.info("exiting", extra={"code": code})
    return code
