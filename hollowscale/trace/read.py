"""Read a trace from its files and check it as a whole, before anything starts.

:func:`read_trace` takes a pod list (CSV) with a node list (CSV), or a cluster dump (JSON) that holds
both; every problem of every file is collected, then the trace is checked as a whole (names unique,
every model a constraint names is a model of the nodes, no pod asks more than the largest node has)
and refused with all of them at once (:class:`~hollowscale.trace.model.TraceError`).  Nothing is
written: a refused trace leaves nothing behind.
"""

from __future__ import annotations

from pathlib import Path

from hollowscale.trace.csvfile import POD_COLUMNS, read_nodes, read_pods
from hollowscale.trace.kubedump import DumpOptions, read_dump
from hollowscale.trace.model import NODE_HEADER, Trace, TraceError, TraceNode, TracePod, TraceProblem


def is_dump(path: str | Path) -> bool:
    """A cluster dump (JSON) rather than a CSV: by its suffix, else by its first character."""
    p = Path(path)
    if p.suffix.lower() == ".json":
        return True
    if p.suffix.lower() == ".csv" or not p.is_file():
        return False
    with p.open("rb") as fh:
        head = fh.read(64).lstrip(b"\xef\xbb\xbf \t\r\n")
    return head[:1] in (b"{", b"[")


def read_trace(pods: str | Path, nodes: str | Path | None = None, options: DumpOptions | None = None) -> Trace:
    """The trace of ``pods`` (a CSV pod list, or a cluster dump) on ``nodes`` (a CSV node list or a dump;
    None: the pods' dump's own nodes).

    Raises:
        TraceError: every problem found, each with file, line and column (or field).
    """
    options = options or DumpOptions()
    problems: list[TraceProblem] = []
    notes: list[str] = []
    pods_path = Path(pods)
    nodes_path = Path(nodes) if nodes is not None else None
    node_list: list[TraceNode] = []
    pod_list: list[TracePod] = []
    node_header: tuple[str, ...] = NODE_HEADER
    pod_header: tuple[str, ...] = tuple(c.name for c in POD_COLUMNS)
    fmt = "csv"
    if is_dump(pods_path):
        fmt = "kubectl-json"
        dump = read_dump(pods_path, options, problems)
        pod_list, node_list = dump.pods, dump.nodes
        notes += dump.notes
        if dump.model_label and not any(p.gpu_spec for p in pod_list):
            notes.append(f"no pod constrains the GPU model (label {dump.model_label})")
    elif nodes_path is None:
        problems.append(TraceProblem("", "a CSV pod list needs a node list: give the nodes file", file=str(pods_path)))
    else:
        pod_header, pod_list = read_pods(pods_path, problems)
    if nodes_path is not None:
        if is_dump(nodes_path):
            node_dump = read_dump(nodes_path, options, problems)
            node_list = node_dump.nodes
            node_header = NODE_HEADER
            notes += [n for n in node_dump.notes if "pod" not in n]
        else:
            node_header, node_list = read_nodes(nodes_path, problems)
    trace = Trace(nodes=tuple(node_list), pods=tuple(pod_list), pods_source=str(pods_path),
                  nodes_source=str(nodes_path or pods_path), format=fmt, columns=pod_header,
                  node_columns=node_header, notes=tuple(notes))
    if not problems:
        problems = check_trace(trace)
    if problems:
        files = list(dict.fromkeys(p.file for p in problems))  # each file in the order it was read
        raise TraceError(sorted(problems, key=lambda p: (files.index(p.file), p.line or 0, p.column or 1_000)))
    return trace


def check_trace(trace: Trace) -> list[TraceProblem]:
    """What is wrong with the trace as a whole (each pod and node is already right by itself)."""
    out: list[TraceProblem] = []
    if not trace.nodes:
        out.append(TraceProblem("", "has no nodes", file=trace.nodes_source))
    if not trace.pods:
        out.append(TraceProblem("", "has no pods", file=trace.pods_source))
    name_col = trace.node_columns[0] if trace.node_columns else "sn"
    seen: dict[str, TraceNode | TracePod] = {}
    for node in trace.nodes:
        if node.name in seen:
            out.append(trace.problem(node, name_col, f"node {node.name!r} named twice ({_at(seen[node.name])})"))
        seen[node.name] = node
    seen = {}
    for pod in trace.pods:
        if pod.name in seen:
            out.append(trace.problem(pod, "name", f"pod {pod.name!r} named twice ({_at(seen[pod.name])})"))
        seen[pod.name] = pod
    if not trace.nodes:
        return out
    models = set(trace.models)
    shapes = {(n.cpu_milli, n.memory_mib, n.gpus) for n in trace.nodes}
    max_cpu = max(s[0] for s in shapes)
    max_mem = max(s[1] for s in shapes)
    max_gpu = max(s[2] for s in shapes)
    for pod in trace.pods:
        unknown = [m for m in pod.gpu_spec if m not in models]
        if unknown:
            out.append(trace.problem(pod, "gpu_spec", f"unknown GPU model {', '.join(map(repr, unknown))}; the nodes "
                                     f"have {', '.join(sorted(models)) or 'no GPUs'}"))
        if any(pod.cpu_milli <= c and pod.memory_mib <= m and pod.num_gpu <= g for c, m, g in shapes):
            continue
        if pod.cpu_milli > max_cpu:
            out.append(trace.problem(pod, "cpu_milli", f"asks {pod.cpu_milli} milli-CPU; the largest node has {max_cpu}"))
        elif pod.memory_mib > max_mem:
            out.append(trace.problem(pod, "memory_mib", f"asks {pod.memory_mib} MiB; the largest node has {max_mem}"))
        elif pod.num_gpu > max_gpu:
            out.append(trace.problem(pod, "num_gpu", f"asks {pod.num_gpu} GPUs; the largest node has {max_gpu}"))
        else:
            out.append(trace.problem(pod, "name", f"asks {pod.cpu_milli} milli-CPU, {pod.memory_mib} MiB and "
                                     f"{pod.num_gpu} GPUs together; no node has all of them"))
    return out


def _at(what: TraceNode | TracePod) -> str:
    return f"first at line {what.line}" if what.line is not None else f"first at {what.item}"
