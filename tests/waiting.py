"""Polling helper shared by the integration tests (importable because pytest puts tests/ on sys.path)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def wait_until(what: str, check: Callable[[], Any], timeout: float = 60.0, every: float = 0.5) -> Any:
    """Call ``check`` every ``every`` s until it returns something truthy; fail naming ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = check()
        if result:
            return result
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def alive(pid: int) -> bool:
    """True while process ``pid`` exists and is not a zombie (a stopped run must leave none)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"
