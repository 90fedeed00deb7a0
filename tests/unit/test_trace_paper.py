"""The paper's protocol as its simulator runs it (issue 28, part 5a): Go's math/rand drawn exactly, the
simulator's pod sequence (shuffle, tuning) for a seed, its allocation curve, and the paper's
fragmentation measure on the harness's own account of the cluster.

The expected sequences and numbers were printed by Go itself: ``tests/fixtures/trace/gorand/main.go``
(math/rand) and ``tests/fixtures/trace/goseq/main.go`` (the simulator's ``Simulate`` steps).
"""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path

import pytest

from hollowscale.trace import Trace, TracePod, read_trace
from hollowscale.trace.frag import (
    CATEGORIES,
    ClusterState,
    Shape,
    TypicalShape,
    node_frag,
    typical_shapes,
)
from hollowscale.trace.gorand import GoRand
from hollowscale.trace.model import TraceNode
from hollowscale.trace.paper import AllocRecord, allocation_curve, paper_sequence

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "trace"
TRACES = ROOT / "traces" / "alibaba-gpu-2023"


@functools.cache
def _trace(name: str) -> Trace:
    return read_trace(TRACES / f"openb_pod_list_{name}.csv", TRACES / "openb_node_list_gpu_node.csv")


@pytest.mark.parametrize("case", json.loads((FIXTURES / "gorand.json").read_text())["cases"],
                         ids=lambda c: f"seed{c['seed']}")
def test_go_math_rand_is_drawn_exactly(case: dict) -> None:
    r = GoRand(case["seed"])
    assert r.int_() == case["int"]
    perm = list(range(case["shuffle_n"]))

    def swap(i: int, j: int) -> None:
        perm[i], perm[j] = perm[j], perm[i]

    r.shuffle(len(perm), swap)
    assert perm[:10] == case["shuffle_head"]
    assert hashlib.sha256("".join(f"{v}," for v in perm).encode()).hexdigest() == case["shuffle_sha256"]
    assert [r.intn(8152) for _ in range(10)] == case["intn_8152"]
    assert [r.intn(1024) for _ in range(5)] == case["intn_1024"]
    assert [r.int63() for _ in range(3)] == case["int63"]


@pytest.mark.parametrize("case", json.loads((FIXTURES / "paper-sequences.json").read_text())["cases"],
                         ids=lambda c: f"{c['trace']}-{c['seed']}-{c['ratio']}")
def test_the_sequence_is_the_simulators(case: dict) -> None:
    trace = _trace(case["trace"])
    seq = paper_sequence(trace, case["seed"], case["ratio"])
    names = [s.pod.name for s in seq.pods]
    assert (len(names), seq.added, seq.removed, seq.demand_milli) == \
        (case["count"], case["added"], case["removed"], case["demand_milli"])
    assert names[:5] == case["head"] and names[-3:] == case["tail"]
    assert hashlib.sha256("".join(n + "\n" for n in names).encode()).hexdigest() == case["sha256"]
    assert [s.index for s in seq.pods] == list(range(len(names)))
    assert all(s.tuned == ("-tuned-" in s.pod.name) for s in seq.pods)


def test_the_default_trace_is_tuned_to_the_target() -> None:
    trace = _trace("default")
    seq = paper_sequence(trace, 42)
    assert seq.capacity_milli == 6_212_000 and seq.target_milli == pytest.approx(8_075_600)
    assert seq.trace_pods == 8152 and seq.added == 2714 and len(seq.pods) == 8152 + 2714
    assert seq.demand_milli <= seq.target_milli  # no pod of the default asks more than one GPU's milli past it
    untuned = paper_sequence(trace, 42, ratio=0)
    assert [s.pod.name for s in untuned.pods] == [s.pod.name for s in seq.pods[:8152]]  # tuning only appends


def test_allocation_curve_buckets_as_the_simulators_analysis() -> None:
    total_gpus = 10  # 10,000 milli-GPU: 1% is 100 milli
    records = [AllocRecord(0, 0), AllocRecord(100, 100), AllocRecord(149, 149), AllocRecord(151, 100),
               AllocRecord(400, 333), AllocRecord(1300, 950)]
    curve = allocation_curve(records, total_gpus)
    assert curve[0] == 0.0
    assert curve[1] == round((1.0 + 1.49) / 2, 2)  # 149 milli is 1.49%: bucket round(1.49) = 1
    assert curve[2] == 1.0  # 1.51% rounds to 2
    assert curve[3] == round((1.0 + 3.33) / 2, 2)  # empty 3: the records of its neighbours 2 and 4
    assert curve[4] == 3.33 and curve[5] == 3.33  # empty 5: bucket 4 stands in
    assert 6 not in curve and curve[12] == curve[13] == curve[14] == 9.5 and 15 not in curve


def test_typical_shapes_of_the_default_trace() -> None:
    trace = _trace("default")
    typical = typical_shapes(trace.pods)
    assert len(typical) == 35 and sum(t.freq for t in typical) == pytest.approx(1.0)
    assert typical[0].shape == Shape(3152, 810, 1, ())  # the most frequent pod of the trace
    assert [t.freq for t in typical] == sorted((t.freq for t in typical), reverse=True)


def test_node_frag_follows_the_paper() -> None:
    share = TypicalShape(Shape(1000, 500, 1), 0.5)  # half the tasks want half a GPU
    whole = TypicalShape(Shape(1000, 1000, 1), 0.25)
    cpu = TypicalShape(Shape(2000, 0, 0), 0.25)
    # a node with 4 CPUs and GPUs 700 and 300 milli idle
    frag = node_frag(4000, [700, 300], "T4", [share, whole, cpu])
    # share: fits (700 >= 500); the 300 GPU is too small for it: q2 0.5 x 300, q3 0.5 x 700
    # whole: fits nowhere, CPU enough: q2 0.25 x 1000; cpu task: xl 0.25 x 1000 (counted as fragment)
    assert frag == pytest.approx([0, 150 + 250, 350, 0, 250, 0, 0])
    assert node_frag(500, [700, 300], "T4", [share])[CATEGORIES.index("q4_lack_cpu")] == pytest.approx(500)
    constrained = TypicalShape(Shape(1000, 500, 1, ("V100M16",)), 1.0)
    assert node_frag(4000, [700, 300], "T4", [constrained])[CATEGORIES.index("no_access")] == pytest.approx(1000)


def test_cluster_state_tracks_allocation_and_fragmentation() -> None:
    nodes = [("n-0", TraceNode("a", 8000, 1000, 2, "T4")), ("n-1", TraceNode("b", 8000, 1000, 1, "T4"))]
    typical = [TypicalShape(Shape(1000, 500, 1), 1.0)]
    cs = ClusterState(nodes, typical)
    assert (cs.gpu_capacity_milli, cs.frag_milli) == (3000, 0.0)
    share = TracePod("s", 1000, 10, 1, 700)
    cs.place("n-0", share, devices=[(1, 700)])
    assert cs.gpu_allocated_milli == 700 and cs.nodes["n-0"].gpu_used == [0, 700]
    assert cs.frag_milli == pytest.approx(300)  # the 300 left on GPU 1 is too small for a half-GPU task
    assert cs.frag_ratio == pytest.approx(300 / 2300)
    taken = cs.place("n-0", TracePod("w", 1000, 10, 1, 1000))  # counted: the least-numbered free GPU
    assert taken == [0] and cs.nodes["n-0"].gpu_used == [1000, 700]
    assert (cs.cpu_allocated_milli, cs.memory_allocated_mib) == (2000, 20)
    with pytest.raises(ValueError, match="free GPUs"):
        cs.place("n-0", TracePod("x", 1, 1, 1, 1000))
    cs.place("n-1", TracePod("y", 1, 1, 1, 600), devices=[(0, 600)])
    with pytest.raises(ValueError, match="would hold 1200"):
        cs.place("n-1", TracePod("z", 1, 1, 1, 600), devices=[(0, 600)])
