"""Look at a report in headless Chromium: screenshot, plot count, console errors (DevTools protocol).

Chromium is started with the flags of a sandboxed CI box and a throw-away profile; the page is
loaded from ``file://``; every ``console.error``/``console.warn``, uncaught exception and failed
resource load is collected; the number of ``figure.plot svg`` elements is read from the DOM; a
full-page PNG is written.  A test helper (``python tests/browser.py reports/latest/report.html``
looks at a report by hand).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--disable-breakpad", "--disable-crash-reporter",
         "--no-first-run", "--disable-dev-shm-usage",
         "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0", "--remote-allow-origins=*"]


@dataclass
class PageCheck:
    plots: int
    svg_elements: int
    console: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    screenshot: Path | None = None
    title: str = ""


def chromium_binary() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        p = shutil.which(name)
        if p:
            return p
    return None


def check_page(html_path: Path, screenshot: Path, timeout_s: float = 60.0) -> PageCheck:
    binary = chromium_binary()
    if binary is None:
        raise RuntimeError("chromium not found: apt-get install -y chromium")
    # the throw-away profile goes whatever happens, a Chromium that never started included
    with tempfile.TemporaryDirectory(prefix="hollowscale-chromium-", ignore_cleanup_errors=True) as profile:
        return _check_with_profile(binary, profile, html_path, screenshot, timeout_s)


def _check_with_profile(binary: str, profile: str, html_path: Path, screenshot: Path, timeout_s: float) -> PageCheck:
    import websocket

    log = open(Path(profile) / "chromium.log", "wb")  # noqa: SIM115
    try:
        proc = subprocess.Popen([binary, *FLAGS, f"--user-data-dir={profile}", "about:blank"], stdout=log,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    except BaseException:
        log.close()
        raise
    try:
        port_file = Path(profile) / "DevToolsActivePort"
        deadline = time.monotonic() + timeout_s
        while not port_file.exists() or not port_file.read_text().strip():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"chromium did not start ({(Path(profile) / 'chromium.log').read_text()[-500:]})")
            time.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as r:
            pages = [t for t in json.loads(r.read()) if t.get("type") == "page"]
        ws = websocket.create_connection(pages[0]["webSocketDebuggerUrl"], timeout=timeout_s, suppress_origin=True)
        seq = 0
        events: list[dict[str, Any]] = []

        def call(method: str, **params: Any) -> dict[str, Any]:
            nonlocal seq
            seq += 1
            ws.send(json.dumps({"id": seq, "method": method, "params": params}))
            while True:
                msg = json.loads(ws.recv())
                if msg.get("id") == seq:
                    if "error" in msg:
                        raise RuntimeError(f"{method}: {msg['error']}")
                    return msg.get("result", {})
                events.append(msg)

        for domain in ("Page", "Runtime", "Log"):
            call(f"{domain}.enable")
        call("Emulation.setDeviceMetricsOverride", width=1200, height=900, deviceScaleFactor=1, mobile=False)
        call("Page.navigate", url=html_path.resolve().as_uri())
        while not any(e.get("method") == "Page.loadEventFired" for e in events):
            if time.monotonic() > deadline:
                raise RuntimeError("page did not load")
            events.append(json.loads(ws.recv()))
        plots = call("Runtime.evaluate", expression="document.querySelectorAll('figure.plot svg').length",
                     returnByValue=True)["result"]["value"]
        svgs = call("Runtime.evaluate", expression="document.querySelectorAll('svg path, svg use').length",
                    returnByValue=True)["result"]["value"]
        title = call("Runtime.evaluate", expression="document.title", returnByValue=True)["result"]["value"]
        metrics = call("Page.getLayoutMetrics")
        size = metrics.get("cssContentSize") or metrics["contentSize"]
        shot = call("Page.captureScreenshot", format="png", captureBeyondViewport=True,
                    clip={"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1})
        screenshot.parent.mkdir(parents=True, exist_ok=True)
        screenshot.write_bytes(base64.b64decode(shot["data"]))
        ws.close()
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=10)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()
    result = PageCheck(plots=int(plots), svg_elements=int(svgs), screenshot=screenshot, title=str(title))
    for e in events:
        method, p = e.get("method"), e.get("params") or {}
        if method == "Runtime.consoleAPICalled":
            text = " ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args") or [])
            result.console.append({"type": p.get("type"), "text": text})
            if p.get("type") in ("error", "assert", "warning"):
                result.errors.append(f"console.{p.get('type')}: {text}")
        elif method == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails") or {}
            result.errors.append(f"exception: {(d.get('exception') or {}).get('description') or d.get('text')}")
        elif method == "Log.entryAdded":
            entry = p.get("entry") or {}
            if entry.get("level") in ("error", "warning"):
                result.errors.append(f"log.{entry.get('level')}: {entry.get('text')} {entry.get('url', '')}")
    return result


def main() -> None:
    page = Path(sys.argv[1])
    shot = Path(sys.argv[2]) if len(sys.argv) > 2 else page.with_name("report.png")
    r = check_page(page, shot)
    print(json.dumps({"plots": r.plots, "errors": r.errors, "screenshot": str(r.screenshot), "console": r.console}, indent=2))
    sys.exit(1 if r.errors or not r.plots else 0)


if __name__ == "__main__":
    main()
