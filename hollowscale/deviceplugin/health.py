"""Where device health comes from: a file anyone can write (fault injection, tests), and for real GPUs a
periodic ``nvidia-smi`` probe.

The health file holds one device ID per line (``#`` starts a comment); every ID listed is Unhealthy, every
other one Healthy.  A missing or empty file means all healthy.  Writing it is how a scenario or a test
takes a GPU away from the scheduler without touching the kubelet: the plugin sends a new ListAndWatch
list, the device manager drops the device from ``allocatable``, and pods already holding it keep running
(as with a real GPU that fails an XID check).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path

from hollowscale.deviceplugin.inventory import InventoryError, parse_gpus, query_nvidia_smi
from hollowscale.deviceplugin.server import DeviceState

log = logging.getLogger("hollowscale.deviceplugin")


def read_health_file(path: Path) -> set[str]:
    """The IDs the file marks unhealthy (empty when the file does not exist)."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return set()
    return {line.split("#", 1)[0].strip() for line in text.splitlines()} - {""}


def probe_real(state: DeviceState) -> set[str]:
    """Real GPUs ``nvidia-smi`` no longer lists (all of them when it fails): fallen off the bus, driver
    gone.  Finer checks (XID events through NVML) are what NVIDIA's plugin adds on top."""
    try:
        present = {g.id for g in parse_gpus(query_nvidia_smi())}
    except InventoryError as exc:
        log.error("health probe: %s", exc)
        present = set()
    return set(state.inventory.ids) - present


class HealthWatcher:
    """A thread that reads the health file every ``interval_s`` (cheap) and runs the probe every
    ``probe_interval_s`` (an nvidia-smi process), handing each result to the state."""

    def __init__(self, state: DeviceState, interval_s: float = 1.0, health_file: Path | None = None,
                 probe: Callable[[DeviceState], set[str]] | None = None, probe_interval_s: float = 10.0) -> None:
        self.state = state
        self.interval_s = interval_s
        self.health_file = health_file
        self.probe = probe
        self.probe_interval_s = probe_interval_s
        self._last_probe = float("-inf")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="deviceplugin-health", daemon=True)

    def poll_once(self) -> None:
        if self.health_file is not None:
            self.state.set_unhealthy(f"health file {self.health_file}", read_health_file(self.health_file))
        if self.probe is not None and time.monotonic() - self._last_probe >= self.probe_interval_s:
            self._last_probe = time.monotonic()
            self.state.set_unhealthy("nvidia-smi probe", self.probe(self.state))

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.poll_once()
            except Exception:  # a bad read must not end health reporting for good
                log.exception("health poll failed")

    def start(self) -> None:
        self.poll_once()  # the first ListAndWatch answer already reflects the file
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=self.interval_s + 1)
