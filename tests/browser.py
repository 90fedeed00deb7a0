"""Look at a report in headless Chromium: screenshot, plot count, console errors (DevTools protocol).

Chromium is started with the flags of a sandboxed CI box and a throw-away profile; everything it
writes goes inside that profile (its temp folder ``.org.chromium.Chromium.*``, crash database, dconf
and NSS files: ``TMPDIR``, ``HOME`` and the XDG folders point there), and the profile is removed once
every Chromium process is gone, or the check fails naming what stayed; the page is
loaded from ``file://``; every ``console.error``/``console.warn``, uncaught exception and failed
resource load is collected; the number of ``figure.plot svg`` elements is read from the DOM; a
full-page PNG is written.  A test helper (``python tests/browser.py reports/latest/report.html``
looks at a report by hand).
"""

from __future__ import annotations

import base64
import contextlib
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
    profile = tempfile.mkdtemp(prefix="hs-chromium-")  # short: Chromium's singleton socket goes in it
    try:
        result = _check_with_profile(binary, profile, html_path, screenshot, timeout_s)
    except BaseException:
        remove_profile(Path(profile))  # what stayed is not reported: the check's own error comes first
        raise
    left = remove_profile(Path(profile))
    if left:
        raise RuntimeError(f"the Chromium profile {profile} could not be removed: {'; '.join(left[:5])}")
    return result


def chromium_env(profile: Path) -> dict[str, str]:
    """Chromium's environment: its temp folder, home and XDG folders inside ``profile`` (made here), so
    that what it writes besides ``--user-data-dir`` (``.org.chromium.Chromium.*`` in the temp folder, the
    crash database under ``~/.config/chromium``, dconf's and NSS's files) is removed with the profile."""
    env = dict(os.environ)
    # "t": Chromium's singleton socket is <TMPDIR>/org.chromium.Chromium.XXXXXX/SingletonSocket, and a
    # unix socket path may not pass 107 bytes (it exits at once, "Socket path too long")
    for var, sub in (("TMPDIR", "t"), ("HOME", "home"), ("XDG_CONFIG_HOME", "config"), ("XDG_CACHE_HOME", "cache"),
                     ("XDG_DATA_HOME", "data")):
        (profile / sub).mkdir(exist_ok=True)
        env[var] = str(profile / sub)
    return env


def remove_profile(profile: Path) -> list[str]:
    """Remove ``profile`` (a folder :func:`check_page` made); what could not be removed, one line each."""
    left: list[str] = []
    if sys.version_info >= (3, 12):
        shutil.rmtree(profile, onexc=lambda _f, path, exc: left.append(f"{path}: {exc}"))
    else:
        shutil.rmtree(profile, onerror=lambda _f, path, info: left.append(f"{path}: {info[1]}"))
    if profile.exists() and not left:
        left.append(f"{profile}: still there")
    return left


def _group_running(pgid: int) -> bool:
    """Whether a process of group ``pgid`` still runs (a zombie does not: it writes nothing)."""
    import psutil

    for proc in psutil.process_iter():
        try:
            if os.getpgid(proc.pid) == pgid and proc.status() != psutil.STATUS_ZOMBIE:
                return True
        except (ProcessLookupError, psutil.Error):
            continue
    return False


def stop_chromium(proc: subprocess.Popen[bytes], grace_s: float = 10.0) -> None:
    """SIGTERM Chromium's process group and wait until none of its processes runs (its renderer, GPU and
    crash handler processes outlive the browser process by a moment, writing into the profile), SIGKILL
    after ``grace_s``."""
    pgid = proc.pid  # start_new_session: the group is the browser's pid
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, sig)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline:
            if proc.poll() is not None and not _group_running(pgid):
                return
            time.sleep(0.1)
    proc.wait(timeout=grace_s)


def _check_with_profile(binary: str, profile: str, html_path: Path, screenshot: Path, timeout_s: float) -> PageCheck:
    import websocket

    env = chromium_env(Path(profile))
    log = open(Path(profile) / "chromium.log", "wb")  # noqa: SIM115
    try:
        proc = subprocess.Popen([binary, *FLAGS, f"--user-data-dir={profile}", "about:blank"], stdout=log,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True, env=env)
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
        stop_chromium(proc)
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
