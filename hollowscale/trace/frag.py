"""GPU fragmentation as the paper defines it, and the cluster state it is measured on.

*Beware of Fragmentation* measures, per node, the idle GPU capacity that the workload's typical tasks
cannot use: for each typical task (a pod shape, weighted by how often it occurs), the node's idle GPU
milli counts as fragment unless the task fits there, and even then the idle milli of GPUs too small
for the task counts.  The cluster's fragmentation is the sum over nodes; its ratio is over all idle
GPU milli.  Transcribed from the simulator (hkust-adsl/kubernetes-scheduler-simulator at 8f3d6417,
``pkg/utils/frag.go``: ``GetTypicalPods``, ``NodeGpuShareFragAmount``, ``GetNodePodFrag``,
``CanNodeHostPodOnGpuMemory``, ``GetGpuFragMilliByNodeResAndPodRes``; ``pkg/simulator/analysis.go``
``ClusterGpuFragReport``), with the settings of its experiments (typical pods: the most frequent shapes
up to 95% of the pods, CPU-only pods included, one shape at a time, no GPU weight).

A task shape is (milli-CPU, milli-GPU per GPU, GPUs, allowed models); memory is not part of it, as in
the simulator.  One difference: the simulator keys a shape by its ``gpu_spec`` text, this by the set
of models (``V100M32|V100M16`` and ``V100M16|V100M32`` are one shape here).

:class:`ClusterState` is the harness's own account of where the scheduler put each pod (node, and for
shared GPUs which device and how much of it), updated per verdict; it gives allocation and
fragmentation after every pod, which the replay's report checks against the apiserver's objects at the
end.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from hollowscale.trace.model import GPU_MILLI, TraceNode, TracePod

#: the simulator's fragment categories (``FragRatioDataMap``), in its order
CATEGORIES = ("q1_lack_both", "q2_lack_gpu", "q3_satisfied", "q4_lack_cpu", "xl_satisfied", "xr_lack_cpu",
              "no_access")
Q1, Q2, Q3, Q4, XL, XR, NA = range(7)
#: the typical pods of the paper's experiments (``--pod-popularity-threshold 95``)
POPULARITY_PCT = 95


@dataclass(frozen=True, order=True)
class Shape:
    """A task shape (the simulator's ``PodResource``): milli-CPU, milli-GPU per GPU, GPUs, allowed models."""

    cpu_milli: int
    gpu_milli: int
    gpus: int
    models: tuple[str, ...] = ()

    @classmethod
    def of(cls, pod: TracePod) -> Shape:
        return cls(pod.cpu_milli, pod.gpu_milli if pod.num_gpu else 0, pod.num_gpu, pod.gpu_spec)

    def _less_key(self) -> tuple[int, int, int, str]:
        return (self.cpu_milli, self.gpu_milli, self.gpus, "|".join(self.models))


@dataclass(frozen=True)
class TypicalShape:
    shape: Shape
    freq: float


def typical_shapes(pods: Iterable[TracePod], popularity_pct: float = POPULARITY_PCT) -> tuple[TypicalShape, ...]:
    """The most frequent shapes covering ``popularity_pct`` % of the pods, frequencies summing to 1."""
    counts = Counter(Shape.of(p) for p in pods)
    total = float(sum(counts.values()))
    # sort.Reverse of (count asc, then PodResource.Less): count desc, then the larger shape first
    ranked = sorted(counts.items(), key=lambda kv: (kv[1], kv[0]._less_key()), reverse=True)
    expected = popularity_pct * total / 100.0
    kept: list[tuple[Shape, float]] = []
    cum = 0.0
    for shape, n in ranked:
        if cum >= expected:
            break
        cum += n
        kept.append((shape, n))
    if len(kept) == len(ranked):
        return tuple(TypicalShape(s, n / total) for s, n in kept)
    return tuple(TypicalShape(s, (n / total) / (cum / total)) for s, n in kept)


def _accessible(model: str, shape: Shape) -> bool:
    if not shape.models:
        return True
    return bool(model) and model in shape.models


def _category(cpu_left: int, gpu_left: Sequence[int], model: str, shape: Shape) -> int:
    """``GetNodePodFrag``: how a node's idle GPUs stand for one task shape."""
    if shape.gpu_milli == 0:
        return XL if cpu_left >= shape.cpu_milli else XR
    if not _accessible(model, shape):
        return NA
    fits = sum(1 for g in gpu_left if g >= shape.gpu_milli) >= shape.gpus
    if fits:
        return Q3 if cpu_left >= shape.cpu_milli else Q4
    return Q2 if cpu_left >= shape.cpu_milli else Q1


def node_frag(cpu_left: int, gpu_left: Sequence[int], model: str, typical: Sequence[TypicalShape]) -> list[float]:
    """``NodeGpuShareFragAmount``: the node's idle GPU milli split over the categories (:data:`CATEGORIES`)."""
    out = [0.0] * len(CATEGORIES)
    left = sum(gpu_left)
    for t in typical:
        cat = _category(cpu_left, gpu_left, model, t.shape)
        if cat == Q3:
            small = sum(g for g in gpu_left if g < t.shape.gpu_milli)
            out[Q2] += t.freq * small
            out[Q3] += t.freq * (left - small)
        else:
            out[cat] += t.freq * left
    return out


@dataclass
class NodeState:
    """One node as the replay has filled it."""

    name: str
    model: str
    cpu_milli: int
    memory_mib: int
    gpus: int
    cpu_used: int = 0
    memory_used: int = 0
    gpu_used: list[int] = field(default_factory=list)  # milli-GPU taken per device

    def __post_init__(self) -> None:
        if not self.gpu_used:
            self.gpu_used = [0] * self.gpus

    @property
    def gpu_left(self) -> list[int]:
        return [GPU_MILLI - u for u in self.gpu_used]


class ClusterState:
    """The nodes and what the replay's verdicts put on them; allocation and fragmentation at any moment."""

    def __init__(self, nodes: Iterable[tuple[str, TraceNode]], typical: Sequence[TypicalShape]):
        """``nodes``: (the node's name in the cluster, its trace node)."""
        self.nodes = {name: NodeState(name, n.model, n.cpu_milli, n.memory_mib, n.gpus) for name, n in nodes}
        self.typical = tuple(typical)
        self._memo: dict[tuple[int, tuple[int, ...], str], list[float]] = {}
        self._frag = {name: self._node_frag(s) for name, s in self.nodes.items()}
        self.frag_sum = [sum(f[i] for f in self._frag.values()) for i in range(len(CATEGORIES))]
        self.gpu_capacity_milli = sum(s.gpus for s in self.nodes.values()) * GPU_MILLI
        self.cpu_capacity_milli = sum(s.cpu_milli for s in self.nodes.values())
        self.memory_capacity_mib = sum(s.memory_mib for s in self.nodes.values())
        self.gpu_allocated_milli = 0
        self.cpu_allocated_milli = 0
        self.memory_allocated_mib = 0

    def _node_frag(self, s: NodeState) -> list[float]:
        left = s.gpu_left
        key = (s.cpu_milli - s.cpu_used, tuple(sorted(left)), s.model)
        hit = self._memo.get(key)
        if hit is None:
            hit = self._memo[key] = node_frag(key[0], left, s.model, self.typical)
        return hit

    def place(self, node: str, pod: TracePod, devices: Sequence[tuple[int, int]] | None = None) -> list[int]:
        """Record ``pod`` bound to ``node``; ``devices``: (GPU index, milli-GPU) it took, as the claims say;
        None: the whole GPUs it asked for (a share rounded up), the least-numbered free ones (a counted
        GPU has no identity).  Returns the GPU indices taken."""
        s = self.nodes[node]
        if devices is None:
            free = [i for i, u in enumerate(s.gpu_used) if u == 0]
            if len(free) < pod.num_gpu:
                raise ValueError(f"{node} has {len(free)} free GPUs, the scheduler bound {pod.name} asking {pod.num_gpu}")
            devices = [(i, GPU_MILLI) for i in free[: pod.num_gpu]]
        old = self._frag[node]
        for i, milli in devices:
            if s.gpu_used[i] + milli > GPU_MILLI:
                raise ValueError(f"{node} GPU {i} would hold {s.gpu_used[i] + milli} milli-GPU")
            s.gpu_used[i] += milli
            self.gpu_allocated_milli += milli
        s.cpu_used += pod.cpu_milli
        s.memory_used += pod.memory_mib
        self.cpu_allocated_milli += pod.cpu_milli
        self.memory_allocated_mib += pod.memory_mib
        new = self._frag[node] = self._node_frag(s)
        for k in range(len(CATEGORIES)):
            self.frag_sum[k] += new[k] - old[k]
        return [i for i, _ in devices]

    @property
    def idle_gpu_milli(self) -> float:
        return float(self.gpu_capacity_milli - self.gpu_allocated_milli)

    @property
    def frag_milli(self) -> float:
        """The cluster's fragmentation (every category but q3_satisfied), milli-GPU."""
        return sum(v for k, v in enumerate(self.frag_sum) if k != Q3)

    @property
    def frag_ratio(self) -> float | None:
        """Fragmentation over idle GPU milli (None when nothing is idle)."""
        idle = sum(self.frag_sum)
        return self.frag_milli / idle if idle > 0 else None
