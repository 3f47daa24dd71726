"""The browser group (marker ``browser``): one headless Chromium page for the group, with the
runner (runner.html, runner.js) loaded from a localhost server over the repository and the npm
package kvdsl installed from its tarball (the session's ``kvdsl_package``). Without
Chromium, Playwright or a WebGPU adapter in the page, every test of the group fails with one
line saying what is missing (tests/helpers/browser.py); nothing is skipped for it."""

from __future__ import annotations

import pytest

from tests.helpers import browser


@pytest.fixture(scope="module")
def chromium(kvdsl_package):
    """The page's host (:class:`tests.helpers.browser.Chromium`), closed after the module that
    uses it (test_browser.py), not kept through the rest of the suite."""
    try:
        host = browser.Chromium(kvdsl_package.project / "node_modules")
    except browser.BrowserMissing as err:
        missing = str(err)
    except Exception as err:  # Playwright's launch errors are long: their first line says it
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        missing = f"the browser tests could not start Chromium: {first}"
    else:
        missing = None
    if missing is not None:
        browser.TALLY.missing = missing
        pytest.fail(missing, pytrace=False)
    browser.TALLY.version = host.version
    browser.TALLY.adapter = host.describe()
    yield host
    host.close()


def pytest_terminal_summary(terminalreporter) -> None:
    """One line: how many variants matched the interpreter in the browser, and which the adapter
    lacked a feature for."""
    line = browser.TALLY.summary()
    if line:
        terminalreporter.write_line(line)
