"""The console in a real browser: one ``jobsched dev`` for the module, Chromium driven by Playwright.

Chromium is Debian's (``/usr/bin/chromium``, installed by ``.ci/run``; Playwright's own browser
download is never used). Without it — or without the ``playwright`` package — every test here is
skipped, with the reason. Each test gets a fresh browser context (so a fresh sessionStorage: nobody is
signed in).

The browser is launched with Chromium's omnibox pop-ups switched off (:data:`UNSEEN_FEATURES`): in
headless Chromium 156 every new tab also loaded them (``chrome://omnibox-popup.top-chrome``), a renderer
process each, about 0.8 s of CPU a tab that no page and no test sees (decision 0044, nineteenth pass).
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from jobsched.cli.client import ApiClient
from tests.local.devproc import DevProcess

TOKENS = {"alpha": "tok-console-alpha", "beta": "tok-console-beta"}
#: Where Chromium is looked for, first hit wins.
CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "chromium", "chromium-browser")
#: Set to a directory to have ``test_axe.py`` write a screenshot of each page there (docs/console.md).
ENV_SCREENSHOTS = "JOBSCHED_CONSOLE_SCREENSHOTS"
UI_TIMEOUT_MS = 30_000
#: Chromium features of the browser's own window the tests switch off: the omnibox's WebUI pop-ups, which
#: a headless browser never shows but loaded for every new tab (about 1.0 s of CPU a tab with them,
#: 0.2 s without, measured with Chromium 156). A name Chromium does not know is ignored.
UNSEEN_FEATURES = ("WebUIOmniboxPopup", "WebUIOmniboxAimPopup")
#: The switch both Playwright and :data:`UNSEEN_FEATURES` need; Chromium keeps only its last value.
DISABLE_FEATURES = "--disable-features="


def chromium_path() -> str | None:
    for candidate in CHROMIUM_CANDIDATES:
        found = (
            candidate
            if os.path.isabs(candidate) and os.access(candidate, os.X_OK)
            else shutil.which(candidate)
        )
        if found:
            return found
    return None


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="playwright is not installed (requirements-dev.txt)"
    )
    # The console polls every 2 s and the machine may be busy: wait up to 30 s for what it shows.
    sync_api.expect.set_options(timeout=UI_TIMEOUT_MS)
    executable = chromium_path()
    if executable is None:
        pytest.skip(
            "no Chromium found (/usr/bin/chromium, chromium or chromium-browser on PATH): "
            "apt-get install chromium"
        )
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, headless=True)
        args = quieter_launch_args(browser_command_line(os.getpid()))
        if args:  # again, with Playwright's own features and the unseen ones switched off
            launched.close()
            launched = playwright.chromium.launch(executable_path=executable, headless=True, args=args)
        try:
            yield launched
        finally:
            launched.close()


def browser_command_line(ancestor: int) -> list[str]:
    """The arguments of the Chromium browser process (not one of its helpers, which have ``--type=``)
    Playwright started under process ``ancestor``, read from ``/proc``; empty where there is none."""
    from jobsched.bench.soak import _children  # a process's children, from /proc

    below = [ancestor]
    while below:
        pid = below.pop()
        try:
            args = (Path("/proc") / str(pid) / "cmdline").read_bytes().decode().split("\0")
            below += _children(pid)
        except OSError:  # no /proc, or the process ended meanwhile
            continue
        if "--remote-debugging-pipe" in args and not any(a.startswith("--type=") for a in args):
            return args
    return []


def quieter_launch_args(command_line: list[str]) -> list[str]:
    """The ``args`` to launch Chromium with so that :data:`UNSEEN_FEATURES` are off as well as every
    feature the browser of ``command_line`` had off (Playwright switches some off with the same
    switch, and Chromium keeps only the switch's last value); empty if they are off already or the
    command line is unknown."""
    if not command_line:
        return []
    values = [arg.removeprefix(DISABLE_FEATURES) for arg in command_line if arg.startswith(DISABLE_FEATURES)]
    off = [name for name in (values[-1].split(",") if values else []) if name]
    if all(name in off for name in UNSEEN_FEATURES):
        return []
    return [DISABLE_FEATURES + ",".join([*off, *(n for n in UNSEEN_FEATURES if n not in off)])]


@contextmanager
def running_dev(*extra: str, env: dict[str, str] | None = None) -> Iterator[DevProcess]:
    """A real ``jobsched dev`` with tenants alpha and beta, no demo jobs, no container worker process
    (``--container-concurrency 0``: no console test runs a job on the container pool; the process cost
    each module's start about 0.9 s of CPU, decision 0044, fifteenth pass), and ``extra``
    arguments, stopped when the block ends."""
    args = ["--no-demo", "--container-concurrency", "0", *extra]
    for tenant, token in TOKENS.items():
        args += ["--tenant", f"{tenant}={token}"]
    process = DevProcess(*args, env=env)
    try:
        process.wait_for_line("run events", timeout=90)
        yield process
    finally:
        try:
            process.stop()
        except Exception:
            process.kill()


@pytest.fixture(scope="module")
def dev() -> Iterator[DevProcess]:
    """Given a real ``jobsched dev`` with tenants alpha and beta and no demo jobs."""
    with running_dev() as process:
        yield process


@pytest.fixture
def api(dev: DevProcess) -> Callable[[str], ApiClient]:
    return lambda tenant: ApiClient(dev.url, token=TOKENS[tenant], timeout=30)


class Console:
    """One browser tab on the console: sign in, go to a page, wait for what it shows. It records the
    page's errors and every request the page made (method, URL, status or failure, seconds), so that a
    failed test prints them (:func:`diagnose`)."""

    def __init__(self, page: Any, url: str):
        self.page = page
        self.url = url
        page.set_default_timeout(UI_TIMEOUT_MS)
        self.errors: list[str] = []
        page.on("pageerror", lambda error: self.errors.append(str(error)))
        self.started: dict[Any, float] = {}  # request -> when it was sent (monotonic)
        self.requests: list[str] = []  # what each finished request answered, in order
        page.on("request", lambda request: self.started.setdefault(request, time.monotonic()))
        page.on("requestfinished", lambda request: self._ended(request, "finished"))
        page.on("requestfailed", lambda request: self._ended(request, f"failed: {request.failure}"))

    def _ended(self, request: Any, how: str) -> None:
        seconds = time.monotonic() - self.started.pop(request, time.monotonic())
        try:
            status = request.response().status if how == "finished" else ""
        except Exception:  # the response is gone with its page: the outcome is enough
            status = ""
        self.requests.append(f"{request.method} {request.url} {status} {how} in {seconds:.2f} s")

    def sign_in(self, tenant: str) -> None:
        self.page.goto(self.url + "/ui")
        self.page.get_by_label("Tenant token").fill(TOKENS[tenant])
        self.page.get_by_role("button", name="Sign in").click()
        self.page.get_by_role("heading", name="Overview", exact=True).wait_for()

    def open(self, fragment: str) -> None:
        """Go to ``#/<fragment>`` the way a link does (no reload)."""
        self.page.evaluate("f => { location.hash = f; }", "#/" + fragment)

    def heading(self, name: str) -> Any:
        return self.page.get_by_role("heading", level=1, name=name)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """Keep each phase's report on the test item, for :func:`console`'s teardown."""
    report = yield
    setattr(item, f"report_{report.when}", report)
    return report


def diagnose(tab: Console, dev: DevProcess) -> str:
    """What a failed console test prints: the tab's URL, text and errors, its requests (those never
    answered first: a request the API did not answer leaves the page without its data), and the last
    lines of ``jobsched dev``'s output and of its log file."""
    now = time.monotonic()
    pending = [f"{r.method} {r.url} unanswered after {now - t:.2f} s" for r, t in tab.started.items()]
    try:
        text = tab.page.inner_text("body")[:3000]
    except Exception as exc:  # a closed or crashed page: say so
        text = f"(no text: {exc})"
    log = next((line.split()[1] for line in dev.lines if line.strip().startswith("logs ")), "")
    tail = Path(log).read_text(errors="replace").splitlines()[-60:] if log and Path(log).exists() else []
    return "\n".join(
        [f"--- console tab at {tab.page.url}", text, "--- page errors", *tab.errors, "--- requests",
         *pending, *tab.requests[-60:], "--- jobsched dev output", *dev.lines[-40:],
         f"--- jobsched dev log {log}", *tail]
    )  # fmt: skip


@pytest.fixture
def console(request: pytest.FixtureRequest, browser: Any, dev: DevProcess) -> Iterator[Callable[[], Console]]:
    contexts: list[Any] = []
    tabs: list[Console] = []

    def make() -> Console:
        context = browser.new_context(viewport={"width": 1280, "height": 800})
        contexts.append(context)
        tabs.append(Console(context.new_page(), dev.url))
        return tabs[-1]

    yield make
    report = getattr(request.node, "report_call", None)
    if report is not None and report.failed:
        for tab in tabs:
            print(diagnose(tab, dev))  # pytest shows it under "Captured stdout teardown"
    for context in contexts:
        context.close()


def screenshot_dir() -> Path | None:
    value = os.environ.get(ENV_SCREENSHOTS, "").strip()
    return Path(value) if value else None


def axe_violations(page: Any) -> str:
    """axe-core's report of ``page``'s violations, empty when there are none (the test is skipped
    without axe-playwright-python)."""
    axe = pytest.importorskip(
        "axe_playwright_python.sync_playwright", reason="axe-playwright-python is not installed"
    )
    results = axe.Axe().run(page)
    return "" if results.violations_count == 0 else results.generate_report()
