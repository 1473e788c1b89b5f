"""``jobsched dev``: the whole of jobsched on this machine, against an embedded moto (``make run``).

Starts the embedded mode (:mod:`jobsched.local`), prints the URL, the docs links, the tenants and one
line per run event, and stops cleanly on Ctrl-C (SIGINT) or SIGTERM.

The functions' own output (Powertools JSON logs, EMF metrics) goes to a log file, one per run, in one
directory: ``--log-dir``, else ``$JOBSCHED_DEV_LOG_DIR``, else ``$XDG_CACHE_HOME/jobsched/dev-logs``
(``~/.cache/jobsched/dev-logs``). Each start removes all but the newest :data:`KEEP_LOGS` logs there
(the new one included).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

from jobsched.cli.commands._process import bounded, on_stop_signals
from jobsched.client import ENV_TOKEN
from jobsched.core.errors import ValidationError
from jobsched.core.ids import DUE_PARTITIONS
from jobsched.core.shares import DEFAULT_FAIR_SHARE, check_share
from jobsched.local.config import LocalConfig, resolve_tenants
from jobsched.runtime import resources

ENV_LOG_DIR = "JOBSCHED_DEV_LOG_DIR"
#: Logs kept in the log directory, the one being written included; older ones are removed at start.
KEEP_LOGS = 5
LOG_PREFIX = "jobsched-dev-"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "dev",
        help="run jobsched locally against an embedded AWS emulator (what `make run` starts)",
        description=(
            "Run the API, dispatcher, workers, DLQ consumer and sweeper on this machine against an "
            "in-process moto server, and the container pool's worker as a process of its own. "
            "Without --tenant there is one tenant `default` whose token is "
            f"${ENV_TOKEN} (or a generated one, printed)."
        ),
    )
    add_arguments(parser)
    parser.set_defaults(func=run_and_exit)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--port", type=_port, default=8080, help="API port on 127.0.0.1 (default 8080; 0 = any)"
    )
    parser.add_argument(
        "--tenant",
        action="append",
        default=[],
        metavar="NAME=TOKEN",
        help="define a tenant and its bearer token (repeatable)",
    )
    parser.add_argument("--no-demo", action="store_true", help="start empty: register no demo jobs")
    parser.add_argument(
        "--shards",
        type=_shard_count,
        default=resources.DEFAULT_SHARDS,
        help=f"dispatcher shards, 1..{DUE_PARTITIONS} (default %(default)s)",
    )
    parser.add_argument(
        "--moto-port",
        type=_port,
        default=None,
        help="port of the AWS emulator for SQS, Step Functions and S3 (default: any free port)",
    )
    parser.add_argument(
        "--dynamodb-port",
        type=_port,
        default=None,
        help="port of the DynamoDB emulator (default: any free port)",
    )
    parser.add_argument(
        "--log-dir",
        default=None,
        metavar="DIR",
        help=f"where the functions' log files go (default: ${ENV_LOG_DIR}, else ~/.cache/jobsched/dev-logs)",
    )
    parser.add_argument(
        "--sweeper-seconds",
        type=_positive(float),
        default=60.0,
        help="sweeper interval in seconds (default %(default)s)",
    )
    parser.add_argument(
        "--sweeper-grace-seconds",
        type=_at_least(resources.MIN_SWEEPER_GRACE_SECONDS),
        default=resources.DEFAULT_SWEEPER_GRACE_SECONDS,
        metavar="SECONDS",
        help="how long past its due instant, retry or lease a run waits before the sweeper acts on it: "
        "re-sends a lost send, takes over an expired lease, reports a missed deadline (at least 10; "
        "local only; AWS: 120, the default)",
    )
    parser.add_argument(
        "--capacity-max-slots",
        type=int,
        default=0,
        help="the most worker slots a queue's poller is raised to before a forecast peak or on age "
        "(default 0: the configured slots, never raised)",
    )
    parser.add_argument(
        "--retention-days",
        type=_positive(int),
        default=resources.DEFAULT_RETENTION_DAYS,
        help="days runs and their outputs are kept, as the deployment's retention_days (default %(default)s)",
    )
    parser.add_argument(
        "--retention-minutes",
        type=_at_least(10),
        default=None,
        metavar="MINUTES",
        help="keep runs and outputs this many minutes instead (at least 10; local only): a long session "
        "with per-second jobs then holds minutes of runs, not a month's",
    )
    parser.add_argument(
        "--no-fair-queues",
        action="store_true",
        help="hand queued messages out in moto's send order instead of SQS fair-queue order",
    )
    parser.add_argument(
        "--fair-share",
        type=_fair_share,
        default=DEFAULT_FAIR_SHARE,
        metavar="SHARE",
        help="the share of a pool's worker slots one tenant may hold, as the deployment's fair_share: "
        "high/default/low get ceil(slots / SHARE) slots, the rest head-room for other tenants' runs "
        "(0.1 to 1; 1 = off; default %(default)s)",
    )
    parser.add_argument(
        "--admin",
        action="append",
        default=[],
        metavar="TENANT",
        help="this tenant's token is also an administrator's (admin routes: principals, limits; repeatable)",
    )
    parser.add_argument(
        "--tenant-max-running",
        type=_at_least_zero(int),
        default=0,
        metavar="N",
        help="default concurrent runs per tenant, as the deployment's tenant_max_running (0 = none)",
    )
    parser.add_argument(
        "--tenant-runs-per-second",
        type=_at_least_zero(float),
        default=0.0,
        metavar="R",
        help="default runs started per second per tenant, as tenant_runs_per_second (0 = none)",
    )
    parser.add_argument(
        "--container-concurrency",
        type=_at_least_zero(int),
        default=1,
        metavar="N",
        help="runs the container pool's worker process handles at once (default %(default)s; 0: no process)",
    )
    parser.add_argument(
        "--lambda-time-limit",
        type=bounded(int, 1, resources.LAMBDA_TIME_LIMIT_SECONDS, "seconds"),
        default=resources.LAMBDA_TIME_LIMIT_SECONDS,
        metavar="SECONDS",
        help="Lambda's time limit here, 1..900 (default %(default)s): every function invocation ends by "
        "then, and the API refuses a Lambda-pool job whose timeout is longer",
    )
    parser.add_argument(
        "--verbose", action="store_true", help="also show the functions' JSON logs and EMF metrics"
    )


def _port(text: str) -> int:
    value = int(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{text} is not a port (0-65535; 0 picks a free one)")
    return value


def _positive(kind: Callable[[str], Any]) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        value = kind(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"{text} must be greater than 0")
        return value

    parse.__name__ = kind.__name__
    return parse


def _at_least(minimum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text} is not a whole number") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{text} must be at least {minimum}")
        return value

    parse.__name__ = "int"
    return parse


def _at_least_zero(kind: Callable[[str], Any]) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        value = kind(text)
        if value < 0:
            raise argparse.ArgumentTypeError(f"{text} must be 0 or more")
        return value

    parse.__name__ = kind.__name__
    return parse


def _fair_share(text: str) -> float:
    try:
        share = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--fair-share must be a number, got {text!r}") from None
    try:
        return check_share(share, "--fair-share")
    except ValidationError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _shard_count(text: str) -> int:
    value = int(text)
    if not 1 <= value <= DUE_PARTITIONS:
        raise argparse.ArgumentTypeError(f"{text}: the shard count must be 1..{DUE_PARTITIONS}")
    return value


def run_and_exit(args: argparse.Namespace) -> int:
    """The console command: :func:`run`, then end the process at once.

    Everything is stopped and flushed by then; what is left is the interpreter tearing down the
    modules of moto, botocore and the functions, which takes seconds on a busy machine and would
    make Ctrl-C feel slow. (Call :func:`run` to stay in the process.)
    """
    code = run(args)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def run(args: argparse.Namespace, *, out: Callable[[str], None] | None = None) -> int:
    """Run until SIGINT/SIGTERM; 0 on a clean stop, 1 if the embedded mode could not start."""
    _import_from_working_directory()
    tenants, generated = resolve_tenants(args.tenant, os.environ.get(ENV_TOKEN))
    unknown = sorted(set(args.admin) - set(tenants))
    if unknown:
        raise ValidationError(
            f"--admin {unknown[0]!r} is not a tenant: define it with --tenant NAME=TOKEN", field="admin"
        )
    log_dir = None if args.verbose else log_directory(args.log_dir, os.environ)
    with _function_output(log_dir) as (terminal, log_path):
        emit = out or (lambda line: print(line, file=terminal, flush=True))
        return _run(args, tenants, generated, emit, log_path)


def _import_from_working_directory() -> None:
    """Let ``JOBSCHED_HANDLER_MODULES`` name modules of the project you run ``jobsched dev`` in (a console
    script, unlike ``python -m``, does not put the working directory on ``sys.path``)."""
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)


def log_directory(flag: str | None, environ: Mapping[str, str]) -> Path:
    """``--log-dir`` > ``$JOBSCHED_DEV_LOG_DIR`` > ``$XDG_CACHE_HOME/jobsched/dev-logs`` > ``~/.cache``'s."""
    if flag:
        return Path(flag).expanduser()
    if environ.get(ENV_LOG_DIR):
        return Path(environ[ENV_LOG_DIR]).expanduser()
    cache = environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "jobsched" / "dev-logs"


def new_log_file(directory: Path, *, keep: int = KEEP_LOGS, now: datetime | None = None) -> Path:
    """A new log file's path in ``directory`` (created), after removing all but the newest ``keep - 1``
    earlier logs there, so with the new one ``keep`` remain. Only ``jobsched-dev-*.log`` files go."""
    directory.mkdir(parents=True, exist_ok=True)
    logs = sorted(directory.glob(f"{LOG_PREFIX}*.log"), key=lambda p: (p.stat().st_mtime, p.name))
    for old in logs[: max(len(logs) - (keep - 1), 0)]:
        old.unlink(missing_ok=True)
    stamp = (now or datetime.now()).strftime("%Y%m%dT%H%M%S")
    return directory / f"{LOG_PREFIX}{stamp}-{os.getpid()}.log"


@contextlib.contextmanager
def _function_output(log_dir: Path | None) -> Iterator[tuple[TextIO, str | None]]:
    """Where the functions' own output goes: the terminal with ``--verbose`` (``log_dir`` None), else
    a new log file in ``log_dir``.

    The functions print Powertools JSON logs and EMF metrics to stdout (CloudWatch Logs on AWS); in
    the terminal they would drown the run-event lines, so ``sys.stdout`` points at a file while the
    embedded mode runs and the event lines go to the real terminal.
    """
    terminal = sys.stdout
    if log_dir is None:
        yield terminal, None
        return
    path = new_log_file(log_dir)
    with path.open("w", buffering=1) as log_file:
        sys.stdout = log_file
        try:
            yield terminal, str(path)
        finally:
            sys.stdout = terminal


def _run(
    args: argparse.Namespace,
    tenants: dict[str, str],
    generated: bool,
    emit: Callable[[str], None],
    log_path: str | None,
) -> int:
    # Imported here: the embedded mode pulls in moto, which the other commands do not need.
    from jobsched.local.embedded import EmbeddedMode

    config = LocalConfig(
        port=args.port,
        moto_port=args.moto_port,
        dynamodb_port=args.dynamodb_port,
        shards=args.shards,
        tenants=tenants,
        demo=not args.no_demo,
        verbose=args.verbose,
        fair_queues=not args.no_fair_queues,
        fair_share=args.fair_share,
        sweeper_seconds=args.sweeper_seconds,
        sweeper_grace_seconds=args.sweeper_grace_seconds,
        capacity_max_slots=max(0, args.capacity_max_slots),
        retention_days=args.retention_days,
        retention_minutes=args.retention_minutes,
        log_file=log_path,
        admins=tuple(args.admin),
        tenant_max_running=args.tenant_max_running,
        tenant_runs_per_second=args.tenant_runs_per_second,
        container_concurrency=args.container_concurrency,
        lambda_time_limit_seconds=args.lambda_time_limit,
    )
    mode = EmbeddedMode(config, out=emit)
    restore = on_stop_signals(mode.request_stop)
    try:
        try:
            mode.start()
        except OSError as exc:
            ports = f"port {args.port}" + "".join(
                f" or {p}" for p in (args.moto_port, args.dynamodb_port) if p is not None
            )
            print(f"jobsched dev: cannot start: {exc} (is {ports} in use? try --port)", file=sys.stderr)
            return 1
        _print_banner(emit, mode, tenants, generated)
        if log_path:
            emit(f"  logs      {log_path}  (the functions' output; --verbose shows it here)")
        if config.demo:
            _register_demo(emit, mode, tenants)
        emit("run events (Ctrl-C to stop):")
        mode.wait()
        emit("stopping...")
    finally:
        mode.stop()
        restore()
    emit("stopped")
    return 0


def _print_banner(emit: Callable[[str], None], mode: Any, tenants: dict[str, str], generated: bool) -> None:
    url = mode.api_url
    emit(f"jobsched dev: API on {url}")
    if _answers(f"{url}/ui"):
        emit(f"  console   {url}/ui   (the operator console: sign in with a tenant's token)")
    emit(f"  docs      {url}/docs   (OpenAPI: {url}/openapi.json; {url}/ in a browser leads there)")
    emit(f"  AWS       {mode.endpoint_url} (moto: SQS, Step Functions, S3; AWS_ENDPOINT_URL for the aws CLI)")
    emit(f"  DynamoDB  {mode.dynamodb_endpoint_url} (moto; AWS_ENDPOINT_URL_DYNAMODB)")
    for name, token in tenants.items():
        note = " (generated; set JOBSCHED_TOKEN to choose it)" if generated else ""
        emit(f"  tenant    {name}  token {token}{note}")
    first = next(iter(tenants.values()))
    emit(f"  try       JOBSCHED_URL={url} JOBSCHED_TOKEN={first} jobsched jobs list")


def _answers(url: str) -> bool:
    """Whether ``url`` answers 200 (the console is linked only when this build serves it)."""
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def _register_demo(emit: Callable[[str], None], mode: Any, tenants: dict[str, str]) -> None:
    from jobsched.cli.demo_jobs import register_demo_jobs

    name, token = next(iter(tenants.items()))
    try:
        jobs = register_demo_jobs(mode.api_url, token)
    except Exception as exc:  # the demo is a convenience: report it, keep the scheduler running
        emit(f"demo jobs not registered: {exc}")
        return
    emit(f"demo jobs for tenant {name}: " + ", ".join(str(job.get("name")) for job in jobs))


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m jobsched.cli.commands.dev`` (the same as ``jobsched dev``)."""
    parser = argparse.ArgumentParser(prog="jobsched dev")
    add_arguments(parser)
    return run_and_exit(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
