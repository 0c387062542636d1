"""The README's screenshots of the inspector: one per view, from the served inspector (the URL `make demo` ends by
printing) or from a report file (the demo writes one too).

    make demo && .venv/bin/python docs/inspector_screenshots.py "http://127.0.0.1:<port>/inspect?agent=demo-agent&…"
    .venv/bin/python docs/inspector_screenshots.py ~/.engram-demo/inspector.html

Headless Debian chromium through Playwright (as the tests); pngquant, when installed, keeps the PNGs small.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from playwright.sync_api import sync_playwright

VIEWS = ("timeline", "forgetting", "graph", "recall", "working", "discussion")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
OUT = Path(__file__).resolve().parent / "img"


def main(report: str) -> None:
    OUT.mkdir(exist_ok=True)
    served = report.startswith(("http://", "https://"))
    with sync_playwright() as p, tempfile.TemporaryDirectory() as profile:
        # A file opens with the network off; a served page reaches its server only (loopback).
        ctx = p.chromium.launch_persistent_context(profile, executable_path="/usr/bin/chromium", args=FLAGS, headless=True,
                                                   viewport={"width": 1280, "height": 800}, offline=not served)
        page = ctx.new_page()
        page.goto(report if served else Path(report).expanduser().resolve().as_uri())
        for view in VIEWS:
            page.click(f"nav button[data-tab={view}]")
            page.wait_for_selector(f"#view-{view}[data-ready='1']", timeout=20_000)
            page.wait_for_timeout(400)
            path = OUT / f"inspector-{view}.png"
            page.screenshot(path=str(path))
            if shutil.which("pngquant"):
                subprocess.run(["pngquant", "--quality", "60-85", "--force", "--output", str(path), str(path)], check=True)
            print(path, path.stat().st_size)
        ctx.close()


if __name__ == "__main__":
    main(sys.argv[1])
