"""CPU pinning: the fairness rule of the CPU benchmark.

On CPU "the teacher has its own compute" means its own cores. Every process of the bench
calls :func:`pin` first: ``os.sched_setaffinity`` restricts the process (and the threads it
starts later) to the given cores and ``torch.set_num_threads`` makes torch's intra-op pool
exactly that wide, so a 1-core student never spills onto the teacher's core.
"""

from __future__ import annotations

import os


def parse_cpus(text: str | None) -> set[int] | None:
    """``"0"``, ``"0,2"`` or ``"0-3"`` -> set of core ids; ``None``/``""`` -> no pinning."""
    if not text:
        return None
    cpus: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        if "-" in part:
            lo, hi = part.split("-", 1)
            cpus.update(range(int(lo), int(hi) + 1))
        elif part:
            cpus.add(int(part))
    return cpus


def pin(cpus: set[int] | None, threads: int | None) -> dict[str, object]:
    """Apply affinity and torch thread count; returns what was applied (for the result JSON).

    Cores that do not exist on this machine are dropped (and reported) rather than failing,
    so a bench layout written for 2 cores still runs on 1.
    """
    available = os.sched_getaffinity(0)
    applied: set[int] = set(available)
    dropped: list[int] = []
    if cpus:
        usable = cpus & available
        dropped = sorted(cpus - available)
        if usable:
            os.sched_setaffinity(0, usable)
            applied = usable
    import torch  # here, not at the top: parse_cpus serves processes that never load torch

    n = threads if threads and threads > 0 else len(applied)
    torch.set_num_threads(n)
    return {"cpus": sorted(applied), "torch_threads": n, "dropped_cpus": dropped}
