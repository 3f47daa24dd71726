"""The browser group's host: headless Chromium (Debian's ``chromium``, driven by Playwright) on a
page served from the repository over localhost, whose runner (``tests/browser/runner.js``)
imports the npm package ``kvdsl`` and nothing else: the package packed and installed from its
tarball (``tests/helpers/package.py``), served at ``/node_modules/``, where ``runner.html``'s
import map points ``"kvdsl"``.

WebGPU comes from SwiftShader (``--use-webgpu-adapter=swiftshader``): a CPU Vulkan, so the group
runs on any machine. The browser is found at ``KVDSL_CHROMIUM`` (default ``/usr/bin/chromium``,
where ``scripts/setup.sh`` installs it); Playwright's own browser download is not used. Without
the browser, Playwright or an adapter the group fails, one line saying what is missing.
"""

from __future__ import annotations

import base64
import functools
import http.server
import os
import shutil
import threading
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUNNER_PAGE = "/tests/browser/runner.html"
DEFAULT_CHROMIUM = "/usr/bin/chromium"

#: WebGPU on SwiftShader's Vulkan, headless; nothing that calls out (the machine may be offline);
#: no sandbox and no /dev/shm, which CI containers run as root or keep small.
CHROMIUM_ARGS = (
    "--no-sandbox",
    "--disable-dev-shm-usage",
    "--enable-unsafe-webgpu",
    "--enable-features=Vulkan",
    "--use-vulkan=swiftshader",
    "--use-webgpu-adapter=swiftshader",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
)


class BrowserMissing(Exception):
    """What the group needs and this machine lacks, in one line."""


def chromium_path(environ=os.environ) -> str:
    """The browser's executable: ``KVDSL_CHROMIUM`` or Debian's ``/usr/bin/chromium``."""
    path = environ.get("KVDSL_CHROMIUM", DEFAULT_CHROMIUM)
    found = shutil.which(path)
    if found is None:
        raise BrowserMissing(
            f"the browser tests need Chromium at {path} (KVDSL_CHROMIUM), which is not there: "
            "bash scripts/setup.sh installs Debian's chromium"
        )
    return found


#: Where the page finds installed npm packages (``runner.html``'s import map points there).
MODULES = "/node_modules/"


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def __init__(self, *args, modules: Path | None = None, **kwargs) -> None:
        self.modules = modules  # set first: the base class answers the request in __init__
        super().__init__(*args, **kwargs)

    def translate_path(self, path: str) -> str:
        """:data:`MODULES` from ``modules``, everything else from ``directory``."""
        if self.modules is None or not path.startswith(MODULES):
            return super().translate_path(path)
        directory, self.directory = self.directory, str(self.modules)
        try:
            return super().translate_path(path.removeprefix(MODULES[:-1]))
        finally:
            self.directory = directory

    def log_message(self, format, *args) -> None:  # noqa: A002 (the base class's name)
        pass


def serve(root: Path = ROOT, modules: Path | None = None) -> http.server.ThreadingHTTPServer:
    """An HTTP server over ``root`` on a free localhost port, in a daemon thread; with
    ``modules`` (a project's ``node_modules``), :data:`MODULES` serves that folder."""
    handler = functools.partial(_QuietHandler, directory=str(root), modules=modules)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def unb64(text: str) -> bytes:
    return base64.b64decode(text)


@dataclass
class Tally:
    """The group's verdicts over a run: the variants tried, those that matched the interpreter,
    those the adapter lacked a feature for (feature -> names) and those needing more of a limit
    than the adapter offers ((limit, offered) -> names)."""

    tried: set[str] = field(default_factory=set)
    matched: set[str] = field(default_factory=set)
    lacking: dict[str, set[str]] = field(default_factory=dict)
    short: dict[tuple[str, int], set[str]] = field(default_factory=dict)
    version: str = ""
    adapter: str = ""
    missing: str | None = None  # why the group could not start the browser

    def summary(self) -> str | None:
        if self.missing is not None:
            return f"browser: the group failed: {self.missing}"
        total = len(self.tried)
        if not total:
            return None
        line = (
            f"browser: {len(self.matched)} of {total} variants match the interpreter in "
            f"Chromium {self.version} ({self.adapter})"
        )
        for feature, names in sorted(self.lacking.items()):
            need = "needs" if len(names) == 1 else "need"
            listed = ", ".join(sorted(names))
            line += f"; {len(names)} {need} {feature}, which the adapter lacks ({listed})"
        for (limit, offers), names in sorted(self.short.items()):
            need = "needs" if len(names) == 1 else "need"
            listed = ", ".join(sorted(names))
            line += f"; {len(names)} {need} more {limit} than the adapter's {offers} ({listed})"
        return line


TALLY = Tally()


class Chromium:
    """One headless Chromium page with the runner loaded, the npm packages of ``modules`` (the
    installed package's ``node_modules``) served to it; ``call`` runs one of runner.js's exports
    with JSON arguments."""

    def __init__(self, modules: Path) -> None:
        try:
            from playwright.sync_api import sync_playwright
        except ImportError as err:
            raise BrowserMissing(
                f"the browser tests need Playwright ({err}): pip install -e '.[dev]'"
            ) from None
        executable = chromium_path()
        self.server = serve(modules=modules)
        self._playwright = sync_playwright().start()
        self.errors: list[str] = []
        try:
            self.browser = self._playwright.chromium.launch(
                executable_path=executable, args=list(CHROMIUM_ARGS), headless=True
            )
            self.page = self.browser.new_page()
            self.page.on("pageerror", lambda e: self.errors.append(str(e)))
            self.page.on(
                "console",
                lambda m: self.errors.append(m.text) if m.type == "error" else None,
            )
            port = self.server.server_address[1]
            self.page.goto(f"http://127.0.0.1:{port}{RUNNER_PAGE}")
            self.page.wait_for_function(
                "window.kvdslRunner !== undefined || window.kvdslRunnerError"
            )
            failed = self.page.evaluate("window.kvdslRunnerError || null")
            if failed:
                raise BrowserMissing(f"the runner page did not load: {failed}")
            try:
                self.adapter = self.call("adapterInfo")
            except Exception as err:  # Playwright's Error: its first line is the page's
                raise BrowserMissing(
                    "the browser tests need a WebGPU adapter in Chromium (SwiftShader's, with "
                    f"{' '.join(CHROMIUM_ARGS[2:6])}): {str(err).splitlines()[0]}"
                ) from None
        except Exception:
            self.close()
            raise
        self.version = self.browser.version

    def call(self, function: str, *args):
        """``await kvdslRunner[function](...args)`` in the page."""
        return self.page.evaluate(
            "([f, args]) => window.kvdslRunner[f](...args)", [function, list(args)]
        )

    def describe(self) -> str:
        """``google swiftshader``: the adapter's vendor and architecture."""
        return f"{self.adapter['vendor']} {self.adapter['architecture']}"

    def close(self) -> None:
        browser = getattr(self, "browser", None)
        if browser is not None:
            browser.close()
        self._playwright.stop()
        self.server.shutdown()
        self.server.server_close()
