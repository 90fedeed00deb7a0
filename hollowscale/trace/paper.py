"""The paper's protocol as its simulator runs it: the pod sequence, and the allocation curve.

*Beware of Fragmentation* (USENIX ATC '23) measures a policy with its simulator
(hkust-adsl/kubernetes-scheduler-simulator at 8f3d6417, ``pkg/simulator/core.go`` ``Simulate``,
``simulator.go``, ``experiments/analysis/merge_alloc_discrete.py``).  :func:`paper_sequence` makes the
same pod sequence for the same seed, step by step:

1. Go's global generator seeded (``rand.Seed(seed)``) and one number drawn (the ``rand.Int()`` of a
   debug log line's arguments, evaluated whether or not the line is printed);
2. the pods sorted by name and shuffled (``rand.Shuffle``);
3. the list *tuned* to ``ratio`` x the nodes' GPU capacity (in milli-GPU): above it, random pods are
   removed (``rand.Intn`` over the current list) until the demand is at most the target; below it,
   random pods of the trace (drawn from the file's order, ``rand.Intn``) are *appended* after the
   shuffled ones, named ``<name>-tuned-<i>``, until the first draw whose per-GPU milli would overshoot
   (the simulator compares ``demand + milli of one GPU`` and adds ``milli x GPUs``: kept as it is).

Every pod is then scheduled once, in order, none leaves, a failed one is not retried.  After each pod
the simulator logs the GPU milli allocated and the GPU milli *arrived* (every pod's demand so far,
failed ones too); :func:`allocation_curve` turns such records into its published curve: the mean
allocation (% of GPU capacity, 2 decimals) per whole percent of arrived demand, a neighbouring percent
standing in for an empty one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from hollowscale.trace.gorand import GoRand
from hollowscale.trace.model import GPU_MILLI, Trace, TracePod

#: the demand multiple of the paper's experiments (``generate_run_scripts.py``: ``tune_ratio in [1.3]``)
PAPER_RATIO = 1.3
#: its seeds (``range(42, 52)``)
PAPER_SEEDS = tuple(range(42, 52))


@dataclass(frozen=True)
class SequencedPod:
    """One pod of the sequence.

    Attributes:
        index: its place in the sequence (0-based).
        pod: the trace's pod (a tuned copy has the name ``<name>-tuned-<i>``).
        tuned: a copy appended by the tuning.
    """

    index: int
    pod: TracePod
    tuned: bool = False


@dataclass(frozen=True)
class PaperSequence:
    """The pods in the order the paper's protocol schedules them.

    Attributes:
        pods: the sequence.
        seed: Go's seed.
        ratio: the demand multiple tuned to (0: not tuned).
        capacity_milli: the nodes' GPU capacity, milli-GPU.
        demand_milli: the sequence's GPU demand, milli-GPU.
        trace_pods: pods of the trace; removed, added: by the tuning.
    """

    pods: tuple[SequencedPod, ...]
    seed: int
    ratio: float
    capacity_milli: int
    demand_milli: int
    trace_pods: int
    removed: int
    added: int

    @property
    def target_milli(self) -> float:
        return self.ratio * self.capacity_milli


def paper_sequence(trace: Trace, seed: int, ratio: float = PAPER_RATIO) -> PaperSequence:
    """The simulator's pod sequence for ``seed`` (module docstring); ``ratio`` 0 keeps the shuffled trace."""
    rng = GoRand(seed)
    rng.int_()  # core.go: log.Debugf("Random Seed: %d, Random Int: %d", seed, rand.Int())
    pods = sorted(trace.pods, key=lambda p: p.name)
    rng.shuffle(len(pods), lambda i, j: _swap(pods, i, j))
    capacity = trace.gpus * GPU_MILLI
    demand = sum(p.gpu_milli_total for p in pods)
    seq = [SequencedPod(i, p) for i, p in enumerate(pods)]
    removed = added = 0
    if ratio > 0:
        target = ratio * capacity
        if demand > target:
            while demand > target:
                if not seq:
                    raise ValueError(f"no pods left while the demand {demand} is above the target {target}")
                gone = seq.pop(rng.intn(len(seq)))
                demand -= gone.pod.gpu_milli_total
                removed += 1
        elif demand < target:
            workload = trace.pods  # the simulator's workloadPods: the file's order
            while True:
                candidate = workload[rng.intn(len(workload))]
                if demand + candidate.gpu_milli > target:  # one GPU's milli, as the simulator compares
                    break
                demand += candidate.gpu_milli_total
                seq.append(SequencedPod(0, replace(candidate, name=f"{candidate.name}-tuned-{added}", line=None),
                                        tuned=True))
                added += 1
        seq = [replace(s, index=i) for i, s in enumerate(seq)]
    return PaperSequence(tuple(seq), seed, ratio, capacity, demand, len(trace.pods), removed, added)


def _swap(items: list[TracePod], i: int, j: int) -> None:
    items[i], items[j] = items[j], items[i]


@dataclass(frozen=True)
class AllocRecord:
    """What the simulator logs after each pod (``[Alloc]``): GPU milli allocated and arrived so far."""

    arrived_milli: int
    allocated_milli: int


def _arrive_pct(r: AllocRecord, total_gpus: int) -> float:
    return round(r.arrived_milli / total_gpus / 10, 0)


def allocation_curve(records: Sequence[AllocRecord], total_gpus: int, top: int = 130) -> dict[int, float]:
    """Arrived demand (whole %) -> mean GPU allocation (%), as ``merge_alloc_discrete.py`` computes it.

    ``records`` start with the empty cluster (0, 0), as the simulator's first report does.
    """
    arrive = [_arrive_pct(r, total_gpus) for r in records]
    alloc = [round(r.allocated_milli / total_gpus / 10, 2) for r in records]
    out: dict[int, float] = {}
    for pct in range(0, top + 1):
        vals = [a for x, a in zip(arrive, alloc, strict=True) if x == pct]
        if not vals:
            vals = [a for x, a in zip(arrive, alloc, strict=True) if pct - 1 <= x <= pct + 1]
            if not vals:
                continue
        out[pct] = round(sum(vals) / len(vals), 2)
    return out
