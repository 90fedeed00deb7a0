"""Visible progress: phase, nodes Ready, jobs done, current rate (rich live panel, or log lines)."""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.table import Table


class Progress:
    def __init__(self, run_id: str, console: Console | None = None, quiet: bool = False):
        self.console = console or Console(stderr=True)
        self.run_id = run_id
        self.quiet = quiet
        self.phase = "starting"
        self.fields: dict[str, Any] = {}
        self.t0 = time.monotonic()
        self.live: Live | None = None
        self.last_line = 0.0

    def __enter__(self) -> Progress:
        if self.console.is_terminal and not self.quiet:
            self.live = Live(self._render(), console=self.console, refresh_per_second=2, transient=False)
            self.live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.live is not None:
            self.live.update(self._render())
            self.live.__exit__(*exc)
            self.live = None

    def _render(self) -> Table:
        t = Table(title=f"hollowscale run {self.run_id}", show_header=False, expand=False)
        t.add_column("key")
        t.add_column("value")
        t.add_row("phase", f"[bold]{self.phase}[/bold]")
        t.add_row("elapsed", f"{time.monotonic() - self.t0:.0f} s")
        for k, v in self.fields.items():
            t.add_row(k, str(v))
        return t

    def set_phase(self, phase: str) -> None:
        self.phase = phase
        self.log(f"phase: {phase}")
        self.update()

    def update(self, **fields: Any) -> None:
        self.fields.update({k.replace("_", " "): v for k, v in fields.items()})
        if self.live is not None:
            self.live.update(self._render())
        elif not self.quiet and time.monotonic() - self.last_line >= 5.0 and fields:
            self.last_line = time.monotonic()
            body = ", ".join(f"{k}={v}" for k, v in self.fields.items())
            self.console.print(f"[{time.monotonic() - self.t0:6.0f}s] {self.phase}: {body}", highlight=False)

    def log(self, msg: str) -> None:
        if not self.quiet:
            self.console.print(f"[{time.monotonic() - self.t0:6.0f}s] {msg}", highlight=False)
