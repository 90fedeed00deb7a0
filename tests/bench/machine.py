"""Facts about the machine and versions, stamped into every committed benchmark file."""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import platform
import subprocess
from pathlib import Path
from typing import Any

from hollowscale.versions import ETCD_VERSION, KUBERNETES_VERSION, KUEUE_VERSION


def machine_facts() -> dict[str, Any]:
    """Date, CPU model, cores, memory, OS, Python and Go versions, pinned component versions."""
    cpu = "unknown"
    with contextlib.suppress(OSError):
        cpu = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                    if ln.startswith("model name")), cpu)
    mem_kb = 0
    with contextlib.suppress(OSError):
        mem_kb = next((int(ln.split()[1]) for ln in Path("/proc/meminfo").read_text().splitlines()
                       if ln.startswith("MemTotal")), 0)
    try:
        go = subprocess.run(["go", "version"], capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        go = "unavailable"
    return {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": {
            "cpu_model": cpu,
            "cores": os.cpu_count(),
            "memory_gib": round(mem_kb / 2**20, 1),
            "os": platform.platform(),
            "python": platform.python_version(),
            "go": go,
            "load_average_1_5_15": [round(x, 2) for x in os.getloadavg()],
        },
        "versions": {"kubernetes": KUBERNETES_VERSION, "etcd": ETCD_VERSION, "kueue": KUEUE_VERSION},
    }
