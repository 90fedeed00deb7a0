"""Facts about the machine and versions, stamped into every committed benchmark file."""

from __future__ import annotations

import datetime as dt
import os
import platform
import subprocess
from typing import Any

from hollowscale.versions import ETCD_VERSION, KUBERNETES_VERSION


def machine_facts() -> dict[str, Any]:
    """Date, CPU model, cores, memory, OS, Python and Go versions, pinned component versions."""
    cpu = "unknown"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_kb = 0
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal"):
                mem_kb = int(line.split()[1])
    except OSError:
        pass
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
        "versions": {"kubernetes": KUBERNETES_VERSION, "etcd": ETCD_VERSION},
    }
