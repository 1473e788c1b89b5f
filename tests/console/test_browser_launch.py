"""The console tests' browser: Chromium without the omnibox pop-ups a headless browser never shows, and
with every feature Playwright switches off still off (``conftest.browser``, decision 0044, nineteenth
pass)."""

from __future__ import annotations

import os
from typing import Any

import pytest

from tests.console.conftest import UNSEEN_FEATURES, browser_command_line, quieter_launch_args

pytestmark = pytest.mark.slow  # a browser: seconds, not milliseconds


def test_the_unseen_features_join_those_the_browser_had_off() -> None:
    line = ["/usr/lib/chromium/chromium", "--disable-features=A,B", "--headless", "--disable-features=C,D"]

    assert quieter_launch_args(line) == ["--disable-features=C,D,WebUIOmniboxPopup,WebUIOmniboxAimPopup"]


def test_nothing_to_add_when_they_are_off_or_the_command_line_is_unknown() -> None:
    already = ["chromium", "--disable-features=X,WebUIOmniboxAimPopup,WebUIOmniboxPopup"]
    assert quieter_launch_args(already) == []
    assert quieter_launch_args([]) == []
    assert quieter_launch_args(["chromium"]) == ["--disable-features=WebUIOmniboxPopup,WebUIOmniboxAimPopup"]


def test_a_new_tab_loads_no_omnibox_pop_up_and_playwrights_features_stay_off(browser: Any) -> None:
    line = browser_command_line(os.getpid())
    if not line:
        pytest.skip("no /proc to read the browser's command line from")
    switches = [arg for arg in line if arg.startswith("--disable-features=")]
    last = switches[-1].removeprefix("--disable-features=").split(",")
    assert set(UNSEEN_FEATURES) <= set(last)
    # Playwright's own list (the first switch) is kept whole in the value Chromium uses (the last).
    assert set(switches[0].removeprefix("--disable-features=").split(",")) <= set(last)
    assert "HttpsUpgrades" in last  # one of Playwright's, which keeps http:// navigations on http

    context = browser.new_context()
    try:
        context.new_page()
        targets = browser.new_browser_cdp_session().send("Target.getTargets", {"filter": [{}]})
    finally:
        context.close()
    urls = [target["url"] for target in targets["targetInfos"]]
    assert "about:blank" in urls
    assert not [url for url in urls if "omnibox-popup" in url], urls
