"""The console in a real browser: one ``jobsched dev`` for the module, Chromium driven by Playwright.

Chromium is Debian's (``/usr/bin/chromium``, installed by ``.ci/run``; Playwright's own browser
download is never used). Without it — or without the ``playwright`` package — every test here is
skipped, with the reason. Each test gets a fresh browser context (so a fresh sessionStorage: nobody is
signed in).
"""

from __future__ import annotations

import os
import shutil
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
        try:
            yield launched
        finally:
            launched.close()


@contextmanager
def running_dev(*extra: str, env: dict[str, str] | None = None) -> Iterator[DevProcess]:
    """A real ``jobsched dev`` with tenants alpha and beta, no demo jobs, and ``extra`` arguments,
    stopped when the block ends."""
    args = ["--no-demo", *extra]
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
    """One browser tab on the console: sign in, go to a page, wait for what it shows."""

    def __init__(self, page: Any, url: str):
        self.page = page
        self.url = url
        page.set_default_timeout(UI_TIMEOUT_MS)
        self.errors: list[str] = []
        page.on("pageerror", lambda error: self.errors.append(str(error)))

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


@pytest.fixture
def console(browser: Any, dev: DevProcess) -> Iterator[Callable[[], Console]]:
    contexts: list[Any] = []

    def make() -> Console:
        context = browser.new_context(viewport={"width": 1280, "height": 800})
        contexts.append(context)
        return Console(context.new_page(), dev.url)

    yield make
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
