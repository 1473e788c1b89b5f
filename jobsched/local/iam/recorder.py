"""Recording every AWS call each function makes: (function, IAM action, resource ARN), counted.

One hook, around botocore's single entry point for API calls (``BaseClient._make_api_call``), sees
every call of every client (the ones :class:`jobsched.aws.clients.Clients` builds, Powertools' own).
A call is attributed to the function whose invocation is running in its context (a context variable
set around each handler call): the handlers of ``functions/`` are wrapped while the recorder is
installed (and the container worker loop's functions that call AWS, attributed to ``container_worker``:
:data:`LOOP_MODULES`), so a direct handler call in a test, an embedded-mode invocation
(:class:`jobsched.local.invoke.Function`) and a benchmark's invocation are all attributed the same way.
Threads that copy the context (the dispatcher's writes, heartbeats, the worker's record threads) keep
the attribution. A call made for an invocation whose context was lost (a thread started, or a task
submitted to a pool, during an invocation without copying the context; a handler not wrapped) is
recorded as *unattributed*: a failure, since it cannot be checked against any role. Calls made
outside invocations (test setup, read-back, the embedded mode's own pollers) are not counted.

Nothing of this is installed unless asked (:func:`install`, or the ``IAM_CALLS_DIR`` environment
variable read by :func:`install_from_env`): this module is dev-only (jobsched/local is not in the
Lambda asset) and adds nothing to a function's path on AWS.
"""

from __future__ import annotations

import atexit
import contextvars
import functools
import importlib
import json
import os
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from jobsched.local.iam.requests import Names, requests_of
from jobsched.runtime import resources

#: Directory where a process with this variable set writes its recording (``<pid>.json``) at exit.
ENV_CALLS_DIR = "IAM_CALLS_DIR"
#: Handler modules and the function each one is (the worker module serves worker and worker_high).
HANDLER_MODULES = {
    "functions.api": "api",
    "functions.dispatcher": "dispatcher",
    "functions.worker": "worker",
    "functions.dlq_consumer": "dlq_consumer",
    "functions.sweeper": "sweeper",
    "functions.capacity": "capacity",
}
#: The queues with a worker function of their own (infra/workers.py), and that function's name.
OWN_WORKERS = {"high": "worker_high", "long": "worker_long"}
#: Long-running loops that are functions of their own for IAM: the module, the function name, and the
#: module attribute naming the module functions whose calls are the loop's (the container worker's
#: receives, deliveries and hand-backs: checked against its ECS task role).
LOOP_MODULES = {"jobsched.compose.container_worker": ("container_worker", "RECORDED")}

_function: contextvars.ContextVar[str | None] = contextvars.ContextVar("iam_function", default=None)
_handoff = threading.local()  # .function: the invocation a thread or pool task was started for


class Recording:
    """What was recorded: per (function, action, resource) the number of calls, and the failures."""

    def __init__(self) -> None:
        self.triples: Counter[tuple[str, str, str]] = Counter()
        self.operations: Counter[tuple[str, str]] = Counter()
        self.calls = 0
        self.unattributed: Counter[str] = Counter()  # "<started for function> service:Operation"
        self._lock = threading.Lock()
        self._active = 0

    def add(self, function: str, operation: str, requests: list[tuple[str, str]]) -> None:
        with self._lock:
            self.calls += 1
            self.operations[(function, operation)] += 1
            for action, resource in requests:
                self.triples[(function, action, resource)] += 1

    def add_unattributed(self, detail: str) -> None:
        with self._lock:
            self.unattributed[detail] += 1

    def merge(self, other: Recording) -> None:
        with self._lock:
            self.triples.update(other.triples)
            self.operations.update(other.operations)
            self.calls += other.calls
            self.unattributed.update(other.unattributed)

    def to_json(self) -> dict[str, Any]:
        with self._lock:
            return {
                "calls": self.calls,
                "triples": [[f, a, r, n] for (f, a, r), n in sorted(self.triples.items())],
                "operations": [[f, o, n] for (f, o), n in sorted(self.operations.items())],
                "unattributed": dict(self.unattributed),
            }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Recording:
        out = cls()
        out.calls = int(data["calls"])
        out.triples.update({(f, a, r): n for f, a, r, n in data["triples"]})
        out.operations.update({(f, o): n for f, o, n in data["operations"]})
        out.unattributed.update(data.get("unattributed", {}))
        return out

    @classmethod
    def load_file(cls, path: str | os.PathLike[str]) -> Recording:
        return cls.from_json(json.loads(Path(path).read_text()))

    @classmethod
    def load_dir(cls, *directories: str | os.PathLike[str]) -> Recording:
        """Every recording written into ``directories`` (one file per process), merged."""
        out = cls()
        for directory in directories:
            for path in sorted(Path(directory).glob("*.json")):
                out.merge(cls.load_file(path))
        return out


@contextmanager
def invocation(function: str, recording: Recording | None = None) -> Iterator[None]:
    """Attribute the AWS calls made in this context (and contexts copied from it) to ``function``."""
    token = _function.set(function)
    target = recording or _state.recording
    if target is not None:
        with target._lock:
            target._active += 1
    try:
        yield
    finally:
        _function.reset(token)
        if target is not None:
            with target._lock:
                target._active -= 1


def function_of_event(module_function: str, event: Any) -> str:
    """``worker_high`` / ``worker_long`` for a worker batch whose records all come from the high / long
    queue, the module's function otherwise (on AWS only WorkerHigh's mapping reads the high queue, only
    WorkerLong's the long queue)."""
    if module_function != "worker" or not isinstance(event, dict):
        return module_function
    sources = {str(rec.get("eventSourceARN", "")).rsplit(":", 1)[-1] for rec in event.get("Records") or []}
    for kind, function in OWN_WORKERS.items():
        url = os.environ.get(resources.ENV_QUEUE_URL_PREFIX + kind.upper(), "")
        name = url.rstrip("/").rsplit("/", 1)[-1]
        if name and sources == {name}:
            return function
    return module_function


class _State:
    recording: Recording | None = None
    undo: list[Callable[[], None]] = []


_state = _State()


def _wrap_handler(handler: Callable[..., Any], name: str) -> Callable[..., Any]:
    @functools.wraps(handler)
    def attributed(event: Any, context: Any) -> Any:
        with invocation(function_of_event(name, event)):
            return handler(event, context)

    attributed.__iam_wrapped__ = True  # type: ignore[attr-defined]
    return attributed


def _wrap_loop_function(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    @functools.wraps(fn)
    def attributed(*args: Any, **kwargs: Any) -> Any:
        with invocation(name):
            return fn(*args, **kwargs)

    attributed.__iam_wrapped__ = True  # type: ignore[attr-defined]
    return attributed


def _in_handler_frame() -> bool:
    frame = sys._getframe(2)
    while frame is not None:
        code = frame.f_code
        if code.co_name == "handler" and "/functions/" in code.co_filename.replace("\\", "/"):
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


def install(recording: Recording | None = None) -> Recording:
    """Start recording into ``recording`` (a new one by default); :func:`uninstall` stops."""
    from botocore.client import BaseClient

    if _state.recording is not None:
        return _state.recording
    _state.recording = recording or Recording()
    original_call = BaseClient._make_api_call

    def recorded_call(client: Any, operation_name: str, api_params: Any) -> Any:
        target = _state.recording
        if target is None:
            return original_call(client, operation_name, api_params)
        function = _function.get()
        service = client.meta.service_model.service_name
        if function is None:
            started_for = getattr(_handoff, "function", None)
            if (started_for is not None and target._active > 0) or _in_handler_frame():
                target.add_unattributed(f"{started_for or 'a handler'}: {service}:{operation_name}")
        else:
            found = requests_of(service, operation_name, api_params, Names(os.environ))
            target.add(function, f"{service}:{operation_name}", found)
        return original_call(client, operation_name, api_params)

    BaseClient._make_api_call = recorded_call
    _state.undo.append(lambda: setattr(BaseClient, "_make_api_call", original_call))

    original_start = threading.Thread.start

    def start(thread: threading.Thread) -> None:
        started_for = _function.get() or getattr(_handoff, "function", None)
        if started_for is not None:
            run = thread.run

            def marked_run() -> None:
                _handoff.function = started_for
                run()

            thread.run = marked_run  # type: ignore[method-assign]
        original_start(thread)

    threading.Thread.start = start  # type: ignore[method-assign,assignment]
    _state.undo.append(lambda: setattr(threading.Thread, "start", original_start))

    original_submit = ThreadPoolExecutor.submit

    def submit(pool: ThreadPoolExecutor, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        submitted_for = _function.get()
        if submitted_for is None:
            return original_submit(pool, fn, *args, **kwargs)

        def marked(*a: Any, **kw: Any) -> Any:
            previous = getattr(_handoff, "function", None)
            _handoff.function = submitted_for
            try:
                return fn(*a, **kw)
            finally:
                _handoff.function = previous

        return original_submit(pool, marked, *args, **kwargs)

    ThreadPoolExecutor.submit = submit  # type: ignore[method-assign,assignment]
    _state.undo.append(lambda: setattr(ThreadPoolExecutor, "submit", original_submit))

    for module_name, (name, listed) in LOOP_MODULES.items():
        module = importlib.import_module(module_name)
        for attribute in getattr(module, listed):
            original = module.__dict__[attribute]
            if getattr(original, "__iam_wrapped__", False):
                continue
            setattr(module, attribute, _wrap_loop_function(original, name))
            _state.undo.append(functools.partial(setattr, module, attribute, original))
    for module_name, name in HANDLER_MODULES.items():
        module = importlib.import_module(module_name)
        original_handler = module.__dict__["handler"]
        if getattr(original_handler, "__iam_wrapped__", False):
            continue
        setattr(module, "handler", _wrap_handler(original_handler, name))  # noqa: B010
        _state.undo.append(functools.partial(setattr, module, "handler", original_handler))
    return _state.recording


@contextmanager
def capturing() -> Iterator[Recording]:
    """Record into a fresh :class:`Recording` for the block only (tests of the recorder: their calls do
    not land in a recording already installed, e.g. the test session's)."""
    installed = _state.recording is not None
    previous = _state.recording
    fresh = Recording()
    if installed:
        _state.recording = fresh
    else:
        install(fresh)
    try:
        yield fresh
    finally:
        if installed:
            _state.recording = previous
        else:
            uninstall()


def uninstall() -> Recording | None:
    """Stop recording; the recording (None if none was installed)."""
    while _state.undo:
        _state.undo.pop()()
    recording, _state.recording = _state.recording, None
    return recording


def current() -> Recording | None:
    return _state.recording


def write(recording: Recording, directory: str | os.PathLike[str]) -> Path:
    """Write ``recording`` as ``<directory>/<pid>.json`` (replacing this process's earlier file)."""
    path = Path(directory) / f"{os.getpid()}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(recording.to_json()))
    tmp.replace(path)
    return path


def install_from_env(flush_seconds: float = 1.0) -> Recording | None:
    """With ``IAM_CALLS_DIR`` set: record this process and write the recording there, every
    ``flush_seconds`` and at exit (a process stopped by a signal keeps its last flush)."""
    directory = os.environ.get(ENV_CALLS_DIR)
    if not directory or _state.recording is not None:
        return _state.recording
    recording = install()
    stop = threading.Event()

    def flush() -> None:
        while not stop.wait(flush_seconds):
            write(recording, directory)

    threading.Thread(target=flush, name="iam-calls-flush", daemon=True).start()

    def at_exit() -> None:
        stop.set()
        write(recording, directory)

    atexit.register(at_exit)
    return recording
