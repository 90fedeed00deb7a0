"""A workload trace as hollowscale reads it: nodes of a fixed shape and pods with their requests.

One model for every input (the published CSV columns, a user's CSV of the same columns, a
``kubectl get nodes,pods -o json`` dump), so a user's cluster and Alibaba's go through the same
replay.  Every value is a whole number in the unit its name says (``_milli`` thousandths, ``_mib``
MiB, ``_s`` seconds); ``None`` is "not in the trace".

A pod's GPU request is ``num_gpu`` GPUs of which it uses ``gpu_milli`` thousandths each: a GPU share
is ``num_gpu`` 1 with ``gpu_milli`` below 1000, a whole GPU 1000.  ``gpu_spec`` names the GPU models
the pod may run on (empty: any).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from kubecore.schema import FieldError, SpecError

#: the kinds of pod a trace has, in the order every table shows them
KINDS = ("cpu", "share", "one", "multi")
#: how a kind reads in a table
KIND_TITLES = {"cpu": "CPU-only", "share": "GPU share", "one": "one whole GPU", "multi": "multi-GPU"}
#: the columns of a node list, in the published order
NODE_HEADER = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
#: where a dump holds what a CSV column holds (for messages about a dump's pods and nodes)
DUMP_FIELDS = {
    "name": "metadata.name", "sn": "metadata.name", "cpu_milli": "resources (cpu)", "memory_mib": "resources (memory)",
    "num_gpu": "resources (GPUs)", "gpu_spec": "spec (nodeSelector or node affinity on the model label)",
}
#: milli-GPU in a whole GPU
GPU_MILLI = 1000


@dataclass(frozen=True)
class TraceNode:
    """One node of the trace: a hollow node of exactly this shape.

    Attributes:
        name: the node's name in the trace.
        cpu_milli: allocatable CPU, milli-CPU.
        memory_mib: allocatable memory, MiB.
        gpus: whole GPUs.
        model: the GPUs' model ("" for a node without GPUs).
        labels: the node's labels (a cluster dump's; empty from a CSV).
        line, item: where the node is written (a CSV's line, a dump's ``items[3] (Node a)``), for messages.
    """

    name: str
    cpu_milli: int
    memory_mib: int
    gpus: int
    model: str = ""
    labels: tuple[tuple[str, str], ...] = ()
    line: int | None = field(default=None, compare=False)
    item: str = field(default="", compare=False)


@dataclass(frozen=True)
class TracePod:
    """One pod of the trace.

    Attributes:
        name: the pod's name in the trace.
        cpu_milli: CPU requested, milli-CPU.
        memory_mib: memory requested, MiB.
        num_gpu: GPUs requested.
        gpu_milli: thousandths of each GPU used (0 without GPUs; below 1000 only for one GPU).
        gpu_spec: the GPU models the pod may run on, sorted, each once (empty: any model).
        qos: the trace's QoS class ("" when not given).
        phase: the pod's phase when the trace was taken ("" when not given).
        creation_s, deletion_s, scheduled_s: seconds from the trace's start (None: not in the trace).
        line, item: where the pod is written (a CSV's line, a dump's ``items[3] (Pod ns/a)``), for messages.
    """

    name: str
    cpu_milli: int
    memory_mib: int
    num_gpu: int
    gpu_milli: int
    gpu_spec: tuple[str, ...] = ()
    qos: str = ""
    phase: str = ""
    creation_s: int | None = None
    deletion_s: int | None = None
    scheduled_s: int | None = None
    line: int | None = field(default=None, compare=False)
    item: str = field(default="", compare=False)

    @property
    def kind(self) -> str:
        """``cpu``, ``share``, ``one`` or ``multi`` (:data:`KINDS`)."""
        if self.num_gpu == 0:
            return "cpu"
        if self.num_gpu > 1:
            return "multi"
        return "one" if self.gpu_milli >= GPU_MILLI else "share"

    @property
    def gpu_milli_total(self) -> int:
        """The pod's GPU demand in milli-GPU (``num_gpu x gpu_milli``)."""
        return self.num_gpu * self.gpu_milli

    @property
    def gpus_counted(self) -> int:
        """Whole GPUs the pod takes when a share is rounded up to a GPU (the counted replay)."""
        return self.num_gpu


@dataclass(frozen=True)
class Trace:
    """Nodes and pods read from one source, checked.

    Attributes:
        nodes: the nodes, in the file's order.
        pods: the pods, in the file's order.
        pods_source, nodes_source: the files they came from (the same file for a cluster dump).
        format: ``csv`` or ``kubectl-json``.
        columns: the pod columns the source had, in its order (a dump: every column).
        node_columns: the node columns the source had, in its order.
        notes: what was read differently from the file or left out (one line each).
    """

    nodes: tuple[TraceNode, ...]
    pods: tuple[TracePod, ...]
    pods_source: str
    nodes_source: str
    format: str = "csv"
    columns: tuple[str, ...] = ()
    node_columns: tuple[str, ...] = NODE_HEADER
    notes: tuple[str, ...] = ()

    @property
    def models(self) -> tuple[str, ...]:
        """The GPU models of the nodes, sorted."""
        return tuple(sorted({n.model for n in self.nodes if n.gpus}))

    def problem(self, at: TracePod | TraceNode, column: str, message: str) -> TraceProblem:
        """A problem of one pod or node, at its line and column (a CSV) or its field (a dump)."""
        file = self.pods_source if isinstance(at, TracePod) else self.nodes_source
        if at.line is None:
            where = DUMP_FIELDS.get(column, column)
            return TraceProblem(f"{at.item}.{where}" if at.item else where, message, file=file)
        header = self.columns if isinstance(at, TracePod) else self.node_columns
        col = header.index(column) + 1 if column in header else None
        return TraceProblem(column, message, file=file, line=at.line, column=col)

    @property
    def gpus(self) -> int:
        """Whole GPUs of all nodes."""
        return sum(n.gpus for n in self.nodes)

    @property
    def timed(self) -> bool:
        """Every pod has a creation and a deletion time (a time-faithful replay is possible)."""
        return bool(self.pods) and all(p.creation_s is not None and p.deletion_s is not None for p in self.pods)


# ------------------------------------------------------------------------------------------------ errors


@dataclass(frozen=True)
class TraceProblem(FieldError):
    """One problem of a trace file: where (``file:line:column`` for a CSV, the field path for a dump)
    and what was expected.

    Attributes:
        file: the file the problem is in.
        line: 1-based line of a CSV (None for a dump).
        column: 1-based column of a CSV (None for the whole line, or a dump).
    """

    file: str = ""
    line: int | None = None
    column: int | None = None

    def render(self, source: str) -> str:
        where = self.file or source
        if self.line is not None:
            where += f":{self.line}" + (f":{self.column}" if self.column is not None else "")
        return f"{where}: {self.path}: {self.message}" if self.path else f"{where}: {self.message}"


#: problems shown in full; the rest are counted (a broken 8,000-line file would fill a screen)
SHOWN_PROBLEMS = 40


class TraceError(SpecError):
    """A trace that cannot be used: every problem found, each with file, line and column (or field)."""

    def __init__(self, problems: Iterable[TraceProblem]):
        found = list(problems)
        shown = found[:SHOWN_PROBLEMS]
        if len(found) > SHOWN_PROBLEMS:
            last = found[SHOWN_PROBLEMS]
            shown.append(TraceProblem("", f"... and {len(found) - SHOWN_PROBLEMS} more problems", file=last.file))
        super().__init__(found[0].file if found else "trace", shown)
        self.problems = found
