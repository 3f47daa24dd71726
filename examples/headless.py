"""Run examples/index.html in headless Chromium and print what the page says, once it is done.

    python examples/headless.py VARIANT [VARIANT ...] [--json] [--screenshot DIR]

Serves the repository's root on a free localhost port, opens ``/examples/?variant=NAME`` for
each name in one browser (Debian's ``/usr/bin/chromium``, or ``KVDSL_CHROMIUM``, through
Playwright; WebGPU from SwiftShader's CPU Vulkan, so no GPU is needed), and waits until the page
sets ``data-done`` on its body: a screenshot taken before that shows a run still going. Prints
each page's text (with ``--json``, one object per line: variant, done, text), saves
``DIR/NAME.png`` with ``--screenshot``, and exits 1 unless every page's ``data-done`` is
``pass`` (its check matched) or ``shown`` (a mode the page does not check).
"""

from __future__ import annotations

import argparse
import functools
import http.server
import json
import os
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: WebGPU on SwiftShader's Vulkan, headless; no sandbox (containers run as root).
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--enable-unsafe-webgpu",
    "--enable-features=Vulkan",
    "--use-vulkan=swiftshader",
    "--use-webgpu-adapter=swiftshader",
]


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args) -> None:  # noqa: A002 (the base class's name)
        pass


def run_pages(names: list[str], screenshots: Path | None = None, timeout_s: float = 120):
    """``(name, done, text)`` for each variant of ``names``: the page's ``data-done`` (pass,
    fail, shown, error) and the text it shows."""
    from playwright.sync_api import sync_playwright

    handler = functools.partial(_Quiet, directory=str(ROOT))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    results = []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(
                executable_path=os.environ.get("KVDSL_CHROMIUM", "/usr/bin/chromium"),
                args=CHROMIUM_ARGS,
                headless=True,
            )
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            port = server.server_address[1]
            for name in names:
                page.goto(f"http://127.0.0.1:{port}/examples/?variant={name}")
                page.wait_for_selector("body[data-done]", timeout=timeout_s * 1000)
                done = page.get_attribute("body", "data-done")
                text = page.inner_text("#out")
                if screenshots is not None:
                    screenshots.mkdir(parents=True, exist_ok=True)
                    page.screenshot(path=str(screenshots / f"{name}.png"), full_page=True)
                results.append((name, done, text))
            browser.close()
    finally:
        server.shutdown()
        server.server_close()
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("variants", nargs="+", metavar="VARIANT")
    parser.add_argument("--json", action="store_true", help="one JSON object per page")
    parser.add_argument("--screenshot", type=Path, metavar="DIR", help="save DIR/VARIANT.png")
    args = parser.parse_args(argv)
    results = run_pages(args.variants, args.screenshot)
    for name, done, text in results:
        if args.json:
            print(json.dumps({"variant": name, "done": done, "text": text}))
        else:
            print(f"{name}: {done}\n{text}\n")
    return 0 if all(done in ("pass", "shown") for _, done, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main())
