"""``hollowscale trace inspect``'s text: nodes by GPU model, pods by kind, demand against capacity,
constraints, QoS, phases and times, from :func:`hollowscale.trace.inspect_trace`'s figures."""

from __future__ import annotations

from typing import Any

from hollowscale.report.numbers import number
from hollowscale.trace import KIND_TITLES, KINDS

GPU_MILLI = 1000


def _gpus(milli: int) -> str:
    """milli-GPU as GPUs, as few decimals as it needs (``6,086.8``; ``5,641.25``)."""
    return number(milli / GPU_MILLI, 3, trim=True)


def _cores(milli: int) -> str:
    return number(milli / 1000, 1, trim=True)


def _gib(mib: int) -> str:
    return number(mib / 1024, 1, trim=True)


def _pct(ratio: float | None) -> str:
    return "n/a" if ratio is None else f"{number(ratio * 100, 1)}%"


def _table(rows: list[list[str]], right: set[int]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  " + "  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))
                             ).rstrip() for r in rows]


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {number(v)}" for k, v in counts.items())


def inspect_text(f: dict[str, Any]) -> str:
    """The figures as the terminal shows them."""
    src, nodes, pods, demand, cons = f["source"], f["nodes"], f["pods"], f["demand"], f["constraints"]
    out = [f"pods   {src['pods']} ({src['format']}; columns {', '.join(src['columns'])})",
           f"nodes  {src['nodes']}", ""]
    out.append(f"nodes: {number(nodes['total'])} ({number(nodes['gpu_nodes'])} with GPUs, "
               f"{number(nodes['cpu_only_nodes'])} CPU-only), {number(nodes['gpus'])} GPUs of "
               f"{number(nodes['models'])} models")
    rows = [["model", "nodes", "GPUs", "GPUs per node (x nodes)", "CPU cores", "memory GiB"]]
    for m in nodes["by_model"]:
        per = ", ".join(f"{g} x {number(c)}" for g, c in m["gpus_per_node"].items())
        rows.append([m["model"] or "(no GPU)", number(m["nodes"]), number(m["gpus"]), per, _cores(m["cpu_milli"]),
                     _gib(m["memory_mib"])])
    rows.append(["total", number(nodes["total"]), number(nodes["gpus"]), "", _cores(nodes["cpu_milli"]),
                 _gib(nodes["memory_mib"])])
    out += _table(rows, {1, 2, 4, 5})
    out += ["", f"pods: {number(pods['total'])}"]
    rows = [["kind", "pods", "GPUs asked", "GPUs counted", "CPU cores", "memory GiB"]]
    for k in KINDS:
        d = pods["by_kind"][k]
        rows.append([KIND_TITLES[k], number(d["pods"]), _gpus(d["gpu_milli"]), number(d["gpus_counted"]),
                     _cores(d["cpu_milli"]), _gib(d["memory_mib"])])
    rows.append(["total", number(pods["total"]), _gpus(demand["gpu_milli"]), number(demand["gpus_counted"]),
                 _cores(demand["cpu_milli"]), _gib(demand["memory_mib"])])
    out += _table(rows, {1, 2, 3, 4, 5})
    out.append("  (GPUs counted: a share rounded up to a whole GPU, as a counted nvidia.com/gpu replay asks)")
    out += ["", "demand against capacity:",
            f"  GPU     {_gpus(demand['gpu_milli'])} of {_gpus(demand['gpu_capacity_milli'])} GPUs "
            f"({_pct(demand['gpu_ratio'])}); counted {number(demand['gpus_counted'])} "
            f"({_pct(demand['gpus_counted_ratio'])})",
            f"  CPU     {_cores(demand['cpu_milli'])} of {_cores(demand['cpu_capacity_milli'])} cores "
            f"({_pct(demand['cpu_ratio'])})",
            f"  memory  {_gib(demand['memory_mib'])} of {_gib(demand['memory_capacity_mib'])} GiB "
            f"({_pct(demand['memory_ratio'])})", ""]
    if not cons["pods"]:
        out.append("constraints: none (no pod names a GPU model)")
    else:
        out.append(f"constraints: {number(cons['pods'])} pods name the GPU models they may run on")
        rows = [["models", "pods", "GPUs asked", "GPUs of those models"]]
        rows += [[s["models"], number(s["pods"]), _gpus(s["gpu_milli"]), number(s["gpus_available"])]
                 for s in cons["by_models"]]
        out += _table(rows, {1, 2, 3})
    never = cons["never_fit"]
    if never["pods"]:
        more = f" and {number(never['pods'] - len(never['names']))} more" if never["pods"] > len(never["names"]) else ""
        out.append(f"  {number(never['pods'])} pod(s) fit no node of their models and can never run: "
                   f"{', '.join(never['names'])}{more}")
    times = f["times"]
    out += ["", f"qos:    {_counts(f['qos'])}", f"phases: {_counts(f['phases'])}"]
    if times["first_creation_s"] is None:
        out.append("times:  none (the paper's protocol only; no time-faithful replay)")
    else:
        deleted = ("no deletion times" if times["last_deletion_s"] is None
                   else f"last deleted {number(times['last_deletion_s'])} s")
        out.append(f"times:  created {number(times['first_creation_s'])} .. {number(times['last_creation_s'])} s, "
                   f"{deleted}; "
                   + ("a time-faithful replay is possible" if times["timed"]
                      else "some pods lack a time: the paper's protocol only"))
    for note in f["notes"]:
        out.append(f"note:   {note}")
    return "\n".join(out) + "\n"
