"""The embedded mode as one object: start moto, provision, run the functions, stop cleanly.

:class:`EmbeddedMode` starts, in order: the moto server, the process environment (the same variables
infra sets on the Lambda functions, plus ``AWS_ENDPOINT_URL`` and fake credentials), the resources
(from :mod:`jobsched.runtime.resources`), the functions (imported only now, so they build their clients
exactly as on AWS), a check that the loaded handler modules have every handler version the tenants'
jobs and runs refer to (a warning line for each one they lack, :mod:`jobsched.local.handler_check`),
then the container worker's process (:mod:`jobsched.local.container`: the container pool, consuming
the ``container`` queue as the ECS tasks do on AWS), the queue pollers of the Lambda queues, the
schedules (dispatcher ticks, the sweeper, and the housekeeping that does what DynamoDB TTL and the
bucket's lifecycle rule do on AWS, :mod:`jobsched.local.housekeeping`), the HTTP bridge and the
run-event log. Every function invocation ends by Lambda's time limit (``--lambda-time-limit``,
:mod:`jobsched.local.invoke`).
``stop()`` undoes all of it -- threads joined, server closed, environment restored -- in a few seconds.

moto runs in two processes (:class:`MotoProcess`; on Linux one child that imports moto once and
forks the second, :mod:`jobsched.local.moto_child`), not in a thread of this one: everything else
here (pollers, worker invocations, ticks, the API) is Python sharing one interpreter lock, and moto's
request handling is most of the CPU a run costs. One child serves DynamoDB (``AWS_ENDPOINT_URL_DYNAMODB``,
which botocore honours per service), the other everything else (``AWS_ENDPOINT_URL``: SQS, Step Functions
-- whose executions send to SQS inside moto, so the two must share a process -- and S3). A burst of runs
is mostly conditional writes: in a process of their own they no longer slow down the queue receives that
hand the next runs to the workers (see docs/performance.md, schedule lag).

Once started, the objects alive then (modules, the mode's machinery) are frozen out of the garbage
collector's way until :meth:`~EmbeddedMode.stop` (:func:`freeze_startup_objects`): a full collection
holds the interpreter lock, and walking them stopped every thread of the process for 0.2-0.4 s during
a burst.
"""

from __future__ import annotations

import gc
import logging
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from typing import Any

import boto3
from botocore.config import Config

from jobsched.api.auth import ENV_ADMIN_PRINCIPALS
from jobsched.aws.clients import set_lane_source
from jobsched.aws.limits_store import POOL_CEILING_LEASE_SECONDS
from jobsched.compose.seam import Seam
from jobsched.core.shares import format_tenant_slots
from jobsched.local import botocore_loader, collector, moto_child
from jobsched.local.capacity import capacity_tick, local_policy
from jobsched.local.code_version import local_code_version
from jobsched.local.config import LocalConfig, tenant_tokens_json
from jobsched.local.container import ContainerProcess
from jobsched.local.events import RunEventWatcher
from jobsched.local.fair_poller import FairQueuePoller
from jobsched.local.handler_check import handler_warnings
from jobsched.local.housekeeping import Housekeeper
from jobsched.local.http_bridge import HttpBridge
from jobsched.local.iam import recorder as iam_recorder
from jobsched.local.invoke import Function, Handler, load_handler
from jobsched.local.pollers import QueuePoller
from jobsched.local.provision import Provisioned, provision
from jobsched.local.server import MOTO_CONFIG, MotoServer, free_port
from jobsched.local.ticker import Periodic, dispatcher_schedules
from jobsched.runtime import observability as obs
from jobsched.runtime import resources
from jobsched.runtime.clock import SystemClock

log = logging.getLogger(__name__)

REGION = "us-east-1"
#: The account moto gives every resource in the embedded mode.
LOCAL_ACCOUNT = "123456789012"

#: The child's program: moto's own server (``moto.server.main``), quiet, ended when our end of its
#: stdin closes -- so a parent that dies without ``stop()`` (SIGKILL) leaves no server behind (the
#: watch reads the descriptor itself: a forked server must not inherit a lock of ``sys.stdin``). The
#: garbage collector is off during its imports and settled after them (:mod:`jobsched.local.collector`).
#: Each ``--also PORT`` is one more server, forked from this one after the imports
#: (:mod:`jobsched.local.moto_child`).
_MOTO_CHILD = """
import logging, os, sys, threading
logging.getLogger("werkzeug").setLevel(logging.WARNING)
def _orphaned():
    while os.read(0, 65536):
        pass
    os._exit(0)
threading.Thread(target=_orphaned, daemon=True).start()
from jobsched.local import collector
collector.quiet()
from jobsched.local import moto_fixes
moto_fixes.apply()
from jobsched.local.moto_child import fork_servers
from moto.server import main
collector.settle()
main(fork_servers(sys.argv[1:], _orphaned))
"""

#: Whether one child may serve several ports (:mod:`jobsched.local.moto_child` forks them): Linux only,
#: where a process's id names it until its parent reaps it, and ``/proc`` says when it has ended.
FORK_SERVERS = sys.platform == "linux"


def _failure_detail(stderr: str) -> str:
    """What a child that failed to start said, in one line: its last three lines of stderr, after
    the line naming a fatal signal if it died of one (``Fatal Python error: ...``, which a
    faulthandler dump of many threads would otherwise push out of the last three)."""
    lines = stderr.strip().splitlines()
    fatal = [line for line in lines[:-3] if line.startswith("Fatal Python error")][:1]
    return " ".join(fatal + lines[-3:])


class PortTaken(RuntimeError):
    """A moto server could not listen on its port: something else took it."""


#: What werkzeug prints when its port is taken (``OSError.strerror`` of ``EADDRINUSE``).
PORT_TAKEN_TEXT = "Address already in use"


class MotoProcess(MotoServer):
    """moto's server in a child process on ``host:port`` (same interface as :class:`MotoServer`).

    ``spawn(environ, followers=[other, ...])`` starts one child that serves this port and, forked from
    it after moto's imports, each follower's (:mod:`jobsched.local.moto_child`): one import of moto
    instead of one per server. A follower is then stopped by its process id, and its start's errors
    are the first child's."""

    START_TIMEOUT_SECONDS = 60.0
    #: The program the child runs (``python -c``): moto's server with the embedded mode's fixes.
    CHILD_PROGRAM = _MOTO_CHILD

    def __init__(self, port: int | None = None, *, host: str = "127.0.0.1"):
        super().__init__(port, host=host)
        self._process: subprocess.Popen[bytes] | None = None
        self._errors: Any = None
        #: As a follower: the server whose child forked this one's, and this one's process id.
        self._leader: MotoProcess | None = None
        self._pid: int | None = None
        self._followers: list[MotoProcess] = []

    #: How many times a server is started on a newly picked port when its picked one was taken.
    PORT_ATTEMPTS = 3

    def start(self, environ: MutableMapping[str, str], followers: Sequence[MotoProcess] = ()) -> None:
        """Spawn the child (with ``followers``, see :meth:`spawn`) and wait for every server of it. If a
        port was taken before its server listened on it and every port was picked free (none asked
        for), all are stopped and started again on newly picked ports, up to :data:`PORT_ATTEMPTS`
        times."""
        group = (*followers, self)  # stopped followers first: the first child reaps them
        for attempt in range(1, self.PORT_ATTEMPTS + 1):
            self.spawn(environ, followers)
            try:
                for server in (self, *followers):
                    server.wait_started()
                return
            except PortTaken as taken:
                for server in group:
                    server.stop()
                if attempt == self.PORT_ATTEMPTS or not all(server.port_picked for server in group):
                    raise
                log.warning("%s; starting on other ports", taken)
                for server in group:
                    server.port = free_port(server.host)

    def spawn(self, environ: MutableMapping[str, str], followers: Sequence[MotoProcess] = ()) -> None:
        """Start the child without waiting for it to serve (see :meth:`wait_started`); with
        ``followers`` (on Linux), the child serves their ports too, each from a process forked from it,
        with ``MOTO_PORT`` set to that port; elsewhere each follower gets a child of its own."""
        if followers and not FORK_SERVERS:
            for follower in followers:
                follower.spawn(dict(environ))
            followers = ()
        environ["MOTO_PORT"] = str(self.port)
        # The child's stderr, read only if it fails to start; closed by wait_started() or stop().
        self._errors = tempfile.TemporaryFile()  # noqa: SIM115
        also = [arg for follower in followers for arg in (moto_child.ALSO, str(follower.port))]
        self._process = subprocess.Popen(
            [sys.executable, "-c", self.CHILD_PROGRAM, "-H", self.host, "-p", str(self.port), *also],
            env=dict(environ),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE if followers else subprocess.DEVNULL,
            stderr=self._errors,
        )
        self._followers = list(followers)
        for follower in followers:
            follower._leader, follower._pid = self, None
            follower._errors = os.fdopen(os.dup(self._errors.fileno()), "rb")

    def wait_started(self) -> None:
        """Wait until the spawned child answers, then switch on the features the embedded mode needs."""
        assert self._errors is not None, "spawn() first"
        if self._leader is not None:
            self._leader._give_follower_pids()
        else:
            assert self._process is not None, "spawn() first"
        errors, self._errors = self._errors, None
        with errors:
            deadline = time.monotonic() + self.START_TIMEOUT_SECONDS
            while not self._ready():
                if not self._running() or time.monotonic() > deadline:
                    self.stop()
                    errors.seek(0)
                    detail = _failure_detail(errors.read().decode(errors="replace"))
                    failure = PortTaken if PORT_TAKEN_TEXT in detail else RuntimeError
                    raise failure(f"moto server on port {self.port} did not start: {detail}")
                time.sleep(0.05)
        self._post_config(MOTO_CONFIG)

    def _give_follower_pids(self) -> None:
        """Give each follower its server's process id, from the line the child writes once it has
        forked them (read once a spawn; none if the child ended first, or wrote nothing within the
        start timeout)."""
        process = self._process
        if process is None or process.stdout is None or process.stdout.closed:
            return
        ready, _, _ = select.select([process.stdout], [], [], self.START_TIMEOUT_SECONDS)
        line = process.stdout.readline().decode() if ready else ""
        process.stdout.close()
        for follower, pid in zip(self._followers, (int(word) for word in line.split()), strict=False):
            follower._pid = pid

    def _running(self) -> bool:
        if self._leader is not None:
            return self._pid is not None and process_alive(self._pid)
        return self._process is not None and self._process.poll() is None

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.endpoint_url}/moto-api/data.json", timeout=1) as response:
                response.read()
            return True
        except OSError:
            return False

    def stop(self) -> None:
        """Terminate the child and wait for it (killed after 5 s); idempotent."""
        process, self._process = self._process, None
        errors, self._errors = self._errors, None
        pid, self._pid = self._pid, None
        if errors is not None:
            errors.close()
        if pid is not None:
            _end(pid)
        if process is None:
            return
        if process.stdin is not None:
            process.stdin.close()
        if process.stdout is not None:
            process.stdout.close()
        process.terminate()
        try:
            process.wait(5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` still runs (not ended, nor ended and waiting, a zombie, to be reaped:
    ``os.kill(pid, 0)`` still finds a zombie, and an orphan waits for PID 1, which on some machines
    reaps late). Read from ``/proc`` (Linux only: False where there is none)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            state = stat.read().rpartition(")")[2].split()[:1]
    except OSError:
        return False
    return state != ["Z"]


def _end(pid: int) -> None:
    """Terminate a forked server by its id; killed if it still runs after 5 s."""
    for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while process_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        if not process_alive(pid):
            return


def freeze_startup_objects() -> int:
    """Collect, then move every object alive now out of the garbage collector's sight (``gc.freeze``);
    returns how many. The embedded mode calls it once it has started: the modules, botocore's models
    and the mode's own machinery (about 175,000 objects) live as long as the process, yet every full
    collection walked them again -- with the interpreter lock held, so each stopped every poller,
    invocation and API request of the process for 0.2-0.4 s, about once per burst of runs, beside
    moto's answers of a few milliseconds (docs/performance.md, "Noisy neighbour: long runs and the
    fair share"; decision 0057). Frozen, a full collection walks only what was made since: 0.05-0.15
    s. :meth:`EmbeddedMode.stop` gives them back (``gc.unfreeze``), so a later mode in the same
    process frees what this one dropped. It also sets the collector's thresholds to
    :data:`jobsched.local.collector.THRESHOLDS` (a tenth to a fifth of the process's CPU went to
    collections at CPython's defaults; :mod:`jobsched.local.collector`), which stop() restores."""
    return collector.settle()


#: How long :meth:`EmbeddedMode.stop` waits, past its grace, for a tick in progress to end.
TICK_FINISH_SECONDS = 10.0
#: How often a waiting main thread wakes, so a signal's handler runs (:meth:`EmbeddedMode.wait`).
SIGNAL_POLL_SECONDS = 0.5


class EmbeddedMode:
    """jobsched on one machine. Use as a context manager, or ``start()`` / ``stop()``.

    ``handlers`` maps function names (``api``, ``dispatcher``, ``worker``, ``dlq_consumer``,
    ``sweeper``) to callables used instead of the real ones; a name mapped to None is not run.
    Functions not overridden are imported from their ``resources.FUNCTIONS`` handler path.

    moto keeps its state per process, so two embedded modes in one process need different
    ``config.prefix`` values. The real functions build their services once per container, from the
    environment of the first event (each function's seam, :mod:`jobsched.compose.seam`): the embedded
    mode makes each loaded function's seam forget them when it starts and when it stops, so embedded
    modes one after another in one process each run on their own tables and queues (not two at once:
    the environment is the process's).
    """

    def __init__(
        self,
        config: LocalConfig,
        *,
        handlers: dict[str, Handler | None] | None = None,
        environ: MutableMapping[str, str] | None = None,
        out: Callable[[str], None] = print,
        existing: Mapping[str, str] | None = None,
    ):
        self.config = config
        #: Resources that already exist (the deploy rehearsal's stack): the environment the functions
        #: run with -- the deployed functions' variables, the endpoint and credentials. Given, no moto
        #: server is started and nothing is provisioned; the functions, pollers, ticks and bridge run
        #: on what those variables name (``Provisioned.from_environment``).
        self.existing = dict(existing) if existing is not None else None
        self.overrides = dict(handlers or {})
        self.environ = os.environ if environ is None else environ
        self.out = out
        self.stop_event = threading.Event()
        self.server = MotoProcess(config.moto_port, host=config.host)
        self.dynamodb_server = MotoProcess(config.dynamodb_port, host=config.host)
        self.functions: dict[str, Function] = {}
        self.provisioned: Provisioned | None = None
        self.bridge: HttpBridge | None = None
        self.pollers: list[QueuePoller] = []
        self.schedules: list[Periodic] = []
        self.watcher: RunEventWatcher | None = None
        #: The container worker's process (``jobsched worker --pool container``), if started.
        self.container: ContainerProcess | None = None
        self.clients: dict[str, Any] = {}
        self._saved_env: dict[str, str | None] = {}
        self._started = False
        self._frozen = False  # the process's objects frozen by start() (freeze_startup_objects)
        self._thresholds = gc.get_threshold()  # the collector's, restored by stop()

    # --- lifecycle --------------------------------------------------------------------------------

    def __enter__(self) -> EmbeddedMode:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def api_url(self) -> str:
        if self.bridge is None:
            raise RuntimeError("the embedded mode is not started")
        return self.bridge.url

    @property
    def endpoint_url(self) -> str:
        """moto for every service but DynamoDB (``AWS_ENDPOINT_URL``)."""
        return self.server.endpoint_url

    @property
    def dynamodb_endpoint_url(self) -> str:
        """moto for DynamoDB (``AWS_ENDPOINT_URL_DYNAMODB``)."""
        return self.dynamodb_server.endpoint_url

    def start(self) -> None:
        """Bring everything up; on any failure, tear down what was started and re-raise."""
        self._started = True
        # Each function's clients come from a session of its own: one parse of botocore's models for all.
        botocore_loader.share()
        try:
            if self.overrides.get("api", True) is not None:
                self.bridge = HttpBridge(None, host=self.config.host, port=self.config.port)
            if self.existing is None:
                self._start_servers()
            else:
                self._set_env(self.existing)
            # Every DynamoDB request names its tenant, and the emulator handles a few of one tenant at
            # once (moto_fixes.lane_slots): one tenant's burst does not slow another's requests.
            set_lane_source(obs.current_lane)
            self.clients = self._make_clients()
            if self.existing is None:
                self.provisioned = provision(
                    dynamodb=self.clients["dynamodb"],
                    sqs=self.clients["sqs"],
                    s3=self.clients["s3"],
                    stepfunctions=self.clients["stepfunctions"],
                    prefix=self.config.prefix,
                    visibility_timeout_seconds=self.config.visibility_timeout_seconds,
                )
                self._set_env(self.provisioned.environment())
            else:
                self.provisioned = Provisioned.from_environment(self.environ, self.clients["sqs"])
            # With IAM_CALLS_DIR set, the functions' AWS calls are recorded there (decision 0038);
            # installed before the handlers are loaded, so that the loaded ones are attributed.
            iam_recorder.install_from_env()
            self.functions = self._load_functions()
            self._forget_services()
            self._warn_unregistered_handlers()
            self._start_container_worker()
            self._start_pollers()
            self._start_schedules()
            if self.bridge is not None and "api" in self.functions:
                self.bridge.start(self.functions["api"])
            elif self.bridge is not None:
                self.bridge.stop()
                self.bridge = None
            self._start_watcher()
            self._thresholds = gc.get_threshold()
            freeze_startup_objects()
            self._frozen = True
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop every thread, the HTTP bridge and moto; restore the environment. Idempotent."""
        if not self._started:
            return
        self._started = False
        self.stop_event.set()
        if self.container is not None:  # its graceful stop (the same grace) runs beside ours
            self.container.request_stop()
        if self.bridge is not None:
            self.bridge.stop()
        # One deadline for everything: invocations still running after it are abandoned.
        deadline = time.monotonic() + self.config.shutdown_grace_seconds
        parts: list[Any] = [*self.pollers, *self.schedules, *([self.watcher] if self.watcher else [])]
        for part in parts:
            part.join(max(0.0, deadline - time.monotonic()))
        # A tick (dispatcher, sweeper, housekeeping) is short and bounded, unlike a handler's
        # invocation: one still running at the deadline (a busy machine) is let finish while the
        # emulator still answers, so none of its calls is made after the environment is restored.
        # One deadline for them all, so a stop stays within the grace plus TICK_FINISH_SECONDS however
        # many ticks are stuck (each waited its own 10 s before: a `jobsched dev` under a loaded CI
        # took over 30 s to stop).
        finish_by = time.monotonic() + TICK_FINISH_SECONDS
        for schedule in self.schedules:
            schedule.join(max(0.0, finish_by - time.monotonic()))
        if self.container is not None:  # handed its runs back while the emulator still answers
            self.container.wait(max(0.0, finish_by - time.monotonic()))
            self.container = None
        self.server.stop()
        self.dynamodb_server.stop()
        set_lane_source(None)
        self._restore_env()
        # Built from this mode's environment: a later embedded mode in this process builds its own.
        self._forget_services()
        if self._frozen:  # what this mode kept alive is the collector's again, garbage once dropped
            self._frozen = False
            gc.unfreeze()
            gc.set_threshold(*self._thresholds)

    def wait(self, timeout: float | None = None) -> bool:
        """Block until :meth:`request_stop` (or a signal handler) asks to stop; True if it did.

        The wait wakes every :data:`SIGNAL_POLL_SECONDS`: Python runs a signal's handler only when the
        main thread next runs Python code, and a signal the kernel hands to another of the process's
        threads does not interrupt a main thread blocked on a lock. An untimed wait then never returned
        (a CI run's `jobsched dev` ignored SIGINT for 30 s, its main thread still in this wait)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            step = SIGNAL_POLL_SECONDS
            if deadline is not None:
                step = min(step, deadline - time.monotonic())
                if step <= 0:
                    return self.stop_event.is_set()
            if self.stop_event.wait(step):
                return True

    def request_stop(self) -> None:
        self.stop_event.set()

    # --- pieces -----------------------------------------------------------------------------------

    def _start_servers(self) -> None:
        # One child imports moto and serves DynamoDB; the other server is forked from it (on Linux;
        # elsewhere it is a child of its own), with MOTO_PORT its own port (queue URLs are built from
        # it). A picked port taken before its server listened on it is picked again (MotoProcess.start):
        # this process's MOTO_PORT is the main server's port once both serve.
        self.dynamodb_server.start(dict(self.environ), followers=[self.server])
        self._set_env({"MOTO_PORT": str(self.server.port), **self._base_env()})

    def _base_env(self) -> dict[str, str]:
        env = {
            "AWS_ENDPOINT_URL": self.server.endpoint_url,
            "AWS_ENDPOINT_URL_DYNAMODB": self.dynamodb_server.endpoint_url,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_SESSION_TOKEN": "testing",
            "AWS_DEFAULT_REGION": REGION,
            "AWS_REGION": REGION,
            resources.ENV_SHARDS: str(self.config.shards),
            resources.ENV_LOOKAHEAD_SECONDS: str(self.config.lookahead_seconds),
            resources.ENV_SEND_ALIGN_MS: str(self.config.send_align_ms),
            resources.ENV_AUTH_MODE: "token",
            resources.ENV_TENANT_TOKENS: tenant_tokens_json(self.config),
            resources.ENV_ALLOWED_HTTP_HOSTS: "127.0.0.1,localhost",
            # Dead-letter notifications may go to any topic of the emulator's one account.
            resources.ENV_NOTIFY_TOPIC_ARNS: f"arn:aws:sns:{REGION}:{LOCAL_ACCOUNT}:*",
            resources.ENV_RETENTION_DAYS: str(self.config.retention_days),
            **(
                {resources.ENV_RETENTION_SECONDS: str(self.config.retention_minutes * 60)}
                if self.config.retention_minutes is not None
                else {}
            ),
            resources.ENV_LAMBDA_TIME_LIMIT: str(self.config.lambda_time_limit_seconds),
            resources.ENV_SWEEPER_GRACE_SECONDS: str(self.config.sweeper_grace_seconds),
            resources.ENV_TENANT_MAX_RUNNING: str(self.config.tenant_max_running),
            resources.ENV_TENANT_RUNS_PER_SECOND: str(self.config.tenant_runs_per_second),
            resources.ENV_TENANT_SLOTS: format_tenant_slots(self.config.tenant_slots()),
            # a tenant's slots follow the capacity service's ceilings (decision 0057), as on AWS
            **({resources.ENV_FAIR_SHARE: str(self.config.fair_share)} if self.config.tenant_slots() else {}),
            ENV_ADMIN_PRINCIPALS: ",".join(f"token:{tenant}" for tenant in self.config.admins),
            "POWERTOOLS_SERVICE_NAME": "jobsched",
            "POWERTOOLS_METRICS_NAMESPACE": "jobsched",
            # What each attempt records as the code that ran it (decision 0048): one set by the
            # caller stays, else the working directory's git revision.
            resources.ENV_CODE_VERSION: self.environ.get(resources.ENV_CODE_VERSION) or local_code_version(),
        }
        if not self.config.verbose:
            env["POWERTOOLS_METRICS_DISABLED"] = "true"
        # INFO, as deployed: the lines about runs are what `jobsched runs logs` shows, and the file
        # shows every message sent (run, attempt, MessageId) and every delivery handled (MessageId,
        # outcome), so a run whose message vanished can be traced (issue 10 §4).
        env["POWERTOOLS_LOG_LEVEL"] = "INFO"
        if self.config.log_file:
            env[resources.ENV_RUN_LOG_FILE] = self.config.log_file
        return env

    def _set_env(self, values: dict[str, str]) -> None:
        for key, value in values.items():
            if key not in self._saved_env:
                self._saved_env[key] = self.environ.get(key)
            self.environ[key] = value

    def _restore_env(self) -> None:
        for key, value in self._saved_env.items():
            if value is None:
                self.environ.pop(key, None)
            else:
                self.environ[key] = value
        self._saved_env.clear()

    def _make_clients(self) -> dict[str, Any]:
        """The embedded mode's own clients (provisioning, pollers, ticks), from ``self.environ``: the
        endpoints, credentials and region it set there, read as boto3 reads them from a process's
        environment (``AWS_ENDPOINT_URL_<SERVICE>`` before ``AWS_ENDPOINT_URL``). Given a private
        ``environ``, the process environment is not consulted."""
        env = self.environ
        session = boto3.session.Session(
            aws_access_key_id=env.get("AWS_ACCESS_KEY_ID"),
            aws_secret_access_key=env.get("AWS_SECRET_ACCESS_KEY"),
            aws_session_token=env.get("AWS_SESSION_TOKEN"),
            region_name=env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or REGION,
        )
        config = Config(max_pool_connections=64, retries={"max_attempts": 3, "mode": "standard"})
        clients = {}
        # client name -> the suffix of its service-specific endpoint variable (boto3's service ids)
        for name, service_id in (
            ("dynamodb", "DYNAMODB"),
            ("sqs", "SQS"),
            ("s3", "S3"),
            ("stepfunctions", "SFN"),
        ):
            endpoint = env.get(f"AWS_ENDPOINT_URL_{service_id}") or env.get("AWS_ENDPOINT_URL")
            clients[name] = session.client(name, config=config, endpoint_url=endpoint)
        return clients

    def _load_functions(self) -> dict[str, Function]:
        functions: dict[str, Function] = {}
        limit = self.config.lambda_time_limit_seconds
        for spec in resources.FUNCTIONS:
            if spec.name in self.overrides:
                handler = self.overrides[spec.name]
                if handler is not None:
                    functions[spec.name] = Function(spec, handler, time_limit_seconds=limit)
                continue
            try:
                functions[spec.name] = Function(spec, load_handler(spec.handler), time_limit_seconds=limit)
            except (ImportError, AttributeError) as exc:
                self.out(f"warning: {spec.name} function unavailable ({exc}); it is not run")
        return functions

    def _forget_services(self) -> None:
        """Each loaded function's built services dropped (its module's ``seam``; an override, such
        as a test's recorder, has none)."""
        for function in self.functions.values():
            module = sys.modules.get(getattr(function.handler, "__module__", "") or "")
            seam = getattr(module, "seam", None)
            if isinstance(seam, Seam):
                seam.forget()

    def _warn_unregistered_handlers(self) -> None:
        """One warning line per handler version the tenants' jobs and runs refer to that the loaded
        handler modules lack (:mod:`jobsched.local.handler_check`). A check that cannot run is one
        warning line too: it never stops the start."""
        if "api" not in self.functions or not self.config.tenants:
            return
        try:
            lines = handler_warnings(self.functions["api"].invoke, self.config.tenants)
        except Exception as exc:  # advisory: whatever went wrong is said, the embedded mode starts
            lines = [
                f"warning: the handlers could not be checked against the data: {type(exc).__name__}: {exc}"
            ]
        for line in lines:
            self.out(line)

    def container_environment(self) -> dict[str, str]:
        """The environment a container worker process of this embedded mode runs with: this process's
        (the functions' variables, the endpoints, the credentials)."""
        return dict(self.environ)

    def _start_container_worker(self) -> None:
        if self.config.container_concurrency < 1 or "worker" in self.overrides:
            return  # none asked for, or the worker replaced (the machinery's tests): the real loop is not run
        self.container = ContainerProcess(
            self.container_environment(),
            concurrency=self.config.container_concurrency,
            stop_timeout_seconds=self.config.shutdown_grace_seconds,
        )
        self.container.start()

    def _start_pollers(self) -> None:
        assert self.provisioned is not None
        config = self.config
        for kind, ref in self.provisioned.queues.items():
            if "worker" in self.functions and kind in resources.LAMBDA_QUEUE_KINDS:
                slots, batch = config.pool_slots(kind), config.batch_sizes.get(kind, config.batch_size)
                self._add_poller(ref.url, ref.arn, self.functions["worker"], slots, kind, batch)
            if "dlq_consumer" in self.functions:
                dlq_consumer = self.functions["dlq_consumer"]
                name = f"{kind}-dlq"
                self._add_poller(
                    ref.dlq_url,
                    ref.dlq_arn,
                    dlq_consumer,
                    config.dlq_slots,
                    name,
                    config.batch_size,
                    wait_seconds=config.dlq_poll_wait_seconds,
                )
        for poller in self.pollers:
            poller.start()

    def _add_poller(
        self,
        url: str,
        arn: str,
        function: Function,
        slots: int,
        name: str,
        batch_size: int,
        *,
        wait_seconds: int | None = None,
    ) -> None:
        poller = FairQueuePoller if self.config.fair_queues else QueuePoller
        self.pollers.append(
            poller(
                sqs=self.clients["sqs"],
                queue_url=url,
                queue_arn=arn,
                invoke=function.invoke,
                slots=slots,
                stop=self.stop_event,
                region=REGION,
                batch_size=batch_size,
                wait_seconds=self.config.poll_wait_seconds if wait_seconds is None else wait_seconds,
                idle_seconds=self.config.poll_idle_seconds,
                name=name,
            )
        )

    def _start_schedules(self) -> None:
        if "dispatcher" in self.functions:
            self.schedules += dispatcher_schedules(
                shards=self.config.shards,
                invoke=self.functions["dispatcher"].invoke,
                stop=self.stop_event,
                interval=self.config.tick_seconds,
            )
        if "sweeper" in self.functions:
            self.schedules.append(
                Periodic(
                    name="sweeper",
                    interval=self.config.sweeper_seconds,
                    event={},
                    invoke=self.functions["sweeper"].invoke,
                    stop=self.stop_event,
                )
            )
        if (
            self.config.capacity_max_slots > 0
            and "worker" in self.functions
            and "worker" not in self.overrides
        ):
            self.schedules.append(
                Periodic(
                    name="capacity",
                    interval=self.config.capacity_seconds,
                    event={},
                    invoke=self.capacity_tick(),
                    stop=self.stop_event,
                )
            )
        housekeeper, clock = self.housekeeper(), SystemClock()
        self.schedules.append(
            Periodic(
                name="housekeeping",
                interval=self.config.housekeeping_seconds,
                event={},
                invoke=lambda _event: housekeeper.expire(clock.now()),
                stop=self.stop_event,
            )
        )
        for schedule in self.schedules:
            schedule.start()

    def capacity_tick(self) -> Callable[[dict[str, Any]], Any]:
        """The capacity service over the Lambda queues' pollers (:mod:`jobsched.local.capacity`)."""
        config = self.config
        pollers = {p.name: p for p in self.pollers if p.name in resources.LAMBDA_QUEUE_KINDS}
        slots = {kind: poller.slots for kind, poller in pollers.items()}
        batches = {kind: config.batch_sizes.get(kind, config.batch_size) for kind in pollers}
        policy = local_policy(slots, batches, config.capacity_max_slots)
        # a raised poller's ceiling item stays in force five ticks unless renewed, as on AWS
        lease = max(POOL_CEILING_LEASE_SECONDS, 5 * config.capacity_seconds)
        return capacity_tick(self.environ, pollers, policy, obs.NullSink(), self.out, lease)

    def housekeeper(self) -> Housekeeper:
        """What deletes expired runs and outputs here (DynamoDB TTL and the S3 lifecycle on AWS)."""
        assert self.provisioned is not None
        return Housekeeper(
            dynamodb=self.clients["dynamodb"],
            s3=self.clients["s3"],
            tables=self.provisioned.tables,
            bucket=self.provisioned.bucket,
            retention=self.config.retention,
        )

    def _start_watcher(self) -> None:
        assert self.provisioned is not None
        tables = self.provisioned.tables
        self.watcher = RunEventWatcher(
            dynamodb=self.clients["dynamodb"],
            runs_table=tables[resources.ENV_RUNS_TABLE],
            jobs_table=tables[resources.ENV_JOBS_TABLE],
            tenants=self.config.tenants.keys(),
            stop=self.stop_event,
            sink=self.out,
            interval=self.config.events_seconds,
        )
        self.watcher.start()
