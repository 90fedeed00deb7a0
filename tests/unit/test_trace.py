"""The trace format and its readers (issue 28, part 1): golden figures of a short excerpt of Alibaba's
trace, the committed traces as their README counts them, a ``kubectl get nodes,pods -o json`` dump of a
cluster, excerpts, and ``hollowscale trace``.

Regenerate the golden files after an intended change with ``HOLLOWSCALE_UPDATE_GOLDEN=1 pytest
tests/unit/test_trace.py`` and review their diff.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from hollowscale.cli import main
from hollowscale.replay.inspection import inspect_text
from hollowscale.trace import KINDS, TracePod, excerpt, inspect_trace, read_trace, write_trace
from hollowscale.trace.csvfile import POD_COLUMNS

ROOT = Path(__file__).resolve().parents[2]
TRACES = ROOT / "traces" / "alibaba-gpu-2023"
FIXTURES = ROOT / "tests" / "fixtures" / "trace"
EXCERPT = FIXTURES / "excerpt"
UPDATE = os.environ.get("HOLLOWSCALE_UPDATE_GOLDEN") == "1"
GPU_NODES = TRACES / "openb_node_list_gpu_node.csv"
ALL_NODES = TRACES / "openb_node_list_all_node.csv"


def _figures(pods: Path, nodes: Path | None = None) -> dict[str, Any]:
    f = inspect_trace(read_trace(pods, nodes))
    f["source"]["pods"] = str(pods.relative_to(ROOT))
    f["source"]["nodes"] = str((nodes or pods).relative_to(ROOT))
    return f


def _golden(path: Path, text: str) -> None:
    if UPDATE:
        path.write_text(text)
    assert text == path.read_text(), f"{path.name} differs (HOLLOWSCALE_UPDATE_GOLDEN=1 to regenerate, then review)"


# ------------------------------------------------------------------------------------------- golden


def test_excerpt_figures_and_text_are_golden() -> None:
    figures = _figures(EXCERPT / "pods.csv", EXCERPT / "nodes.csv")
    _golden(EXCERPT / "inspect.json", json.dumps(figures, indent=2) + "\n")
    _golden(EXCERPT / "inspect.txt", inspect_text(figures))


def test_excerpt_is_read_cell_by_cell() -> None:
    trace = read_trace(EXCERPT / "pods.csv", EXCERPT / "nodes.csv")
    assert trace.format == "csv" and trace.timed and trace.models == ("G2", "G3", "P100", "T4")
    assert trace.gpus == 56 and len(trace.nodes) == 12 and len(trace.pods) == 30
    first = trace.pods[0]
    assert first == TracePod("openb-pod-0381", 88000, 327680, 8, 1000, (), "Burstable", "Failed", 10178857, 10179275,
                             10178858)
    assert first.line == 2 and first.kind == "multi" and first.gpu_milli_total == 8000
    share = next(p for p in trace.pods if p.name == "openb-pod-2538")
    assert (share.kind, share.gpu_spec, share.phase, share.scheduled_s) == ("share", ("P100",), "Pending", None)
    cpu_node = trace.nodes[0]
    assert (cpu_node.name, cpu_node.cpu_milli, cpu_node.memory_mib, cpu_node.gpus, cpu_node.model) == \
        ("openb-node-0008", 32000, 262144, 0, "")


def test_a_written_trace_reads_back_the_same(tmp_path: Path) -> None:
    trace = read_trace(EXCERPT / "pods.csv", EXCERPT / "nodes.csv")
    write_trace(trace, tmp_path / "p.csv", tmp_path / "n.csv")
    assert (tmp_path / "p.csv").read_bytes() == (EXCERPT / "pods.csv").read_bytes()
    assert (tmp_path / "n.csv").read_bytes() == (EXCERPT / "nodes.csv").read_bytes()
    again = read_trace(tmp_path / "p.csv", tmp_path / "n.csv")
    assert again.pods == trace.pods and again.nodes == trace.nodes
    assert sorted(p.name for p in tmp_path.iterdir()) == ["n.csv", "p.csv"]  # no temporary file left


# -------------------------------------------------------------------------------- the committed traces


def test_the_default_trace_is_what_the_paper_and_readme_say() -> None:
    f = _figures(TRACES / "openb_pod_list_default.csv", GPU_NODES)
    assert (f["nodes"]["total"], f["nodes"]["gpus"], f["nodes"]["models"]) == (1213, 6212, 7)
    assert {k: f["pods"]["by_kind"][k]["pods"] for k in KINDS} == {"cpu": 1088, "share": 3078, "one": 3911, "multi": 75}
    assert f["demand"]["gpu_milli"] == 6_086_800 and f["demand"]["gpu_ratio"] == 0.9798
    assert f["constraints"]["pods"] == 0 and f["times"]["timed"]
    assert f["qos"] == {"LS": 4647, "BE": 3398, "Burstable": 100, "Guaranteed": 7}
    models = {m["model"]: (m["nodes"], m["gpus"]) for m in f["nodes"]["by_model"]}
    assert models == {"G2": (549, 4392), "T4": (404, 842), "P100": (134, 265), "G3": (39, 312),
                      "V100M16": (55, 195), "V100M32": (30, 204), "A10": (2, 2)}
    every = _figures(TRACES / "openb_pod_list_default.csv", ALL_NODES)["nodes"]
    assert (every["total"], every["cpu_only_nodes"], every["gpus"]) == (1523, 310, 6212)


@pytest.mark.parametrize(("name", "kinds", "gpu_milli", "constrained", "timed"), [
    ("gpushare40", (1088, 4001, 3001, 62), 5_641_250, 0, True),
    ("multigpu20", (1088, 3078, 3911, 247), 7_086_800, 0, False),  # 5 columns: no times
    ("gpuspec33", (1088, 3078, 3911, 75), 6_086_800, 2388, True),
    ("cpu050", (375, 3078, 3911, 75), 6_086_800, 0, True),
])
def test_every_committed_variant_reads(name: str, kinds: tuple[int, ...], gpu_milli: int, constrained: int,
                                       timed: bool) -> None:
    f = _figures(TRACES / f"openb_pod_list_{name}.csv", GPU_NODES)
    assert tuple(f["pods"]["by_kind"][k]["pods"] for k in KINDS) == kinds
    assert (f["demand"]["gpu_milli"], f["constraints"]["pods"], f["times"]["timed"]) == (gpu_milli, constrained, timed)
    # the one pod of gpuspec33 that fits no node of its model (README): counted, not refused
    assert f["constraints"]["never_fit"]["names"] == (["openb-pod-1639"] if name == "gpuspec33" else [])


def test_the_readme_documents_every_column() -> None:
    readme = (TRACES / "README.md").read_text()
    for c in POD_COLUMNS:
        assert f"| `{c.name}` |" in readme, c.name
    for name in ("sn", "gpu", "model"):
        assert f"| `{name}` |" in readme, name
    committed = sorted(p.name for p in TRACES.glob("*.csv"))
    for name in committed:
        assert f"`{name}`" in readme, f"{name} is committed but not described in the README"
    total = sum((TRACES / n).stat().st_size for n in committed)
    assert f"{total:,} bytes of CSV" in readme, f"the README should state the committed size ({total:,})"


# ----------------------------------------------------------------------------------- a cluster's dump


def test_a_kubectl_json_dump_reads_as_a_trace() -> None:
    trace = read_trace(FIXTURES / "cluster.json")
    assert trace.format == "kubectl-json" and trace.nodes_source == trace.pods_source
    nodes = {n.name: n for n in trace.nodes}
    a100 = nodes["gpu-a100-0"]
    assert (a100.cpu_milli, a100.memory_mib, a100.gpus, a100.model) == (95500, 1007241, 8, "NVIDIA-A100-SXM4-80GB")
    assert ("kubernetes.io/hostname", "gpu-a100-0") in a100.labels
    t4 = nodes["gpu-t4-0"]  # no allocatable: its capacity
    assert (t4.cpu_milli, t4.memory_mib, t4.gpus, t4.model) == (15890, 60398, 1, "Tesla-T4")
    assert (nodes["cpu-0"].gpus, nodes["cpu-0"].model, nodes["cpu-0"].memory_mib) == (0, "", 131072)
    pods = {p.name: p for p in trace.pods}
    assert sorted(pods) == ["batch/etl-0", "infer/bert-0", "infer/bert-1", "train/llm-0", "train/prep-0"]
    llm = pods["train/llm-0"]  # limits only: they are the requests; a nodeSelector on the product label
    assert (llm.cpu_milli, llm.memory_mib, llm.num_gpu, llm.gpu_milli, llm.gpu_spec, llm.qos) == \
        (32000, 262144, 4, 1000, ("NVIDIA-A100-SXM4-80GB",), "Guaranteed")
    assert (llm.creation_s, llm.scheduled_s, llm.deletion_s) == (0, 2, None)
    prep = pods["train/prep-0"]  # the init container's 6 CPUs are the peak; the sidecar adds its 512Mi
    assert (prep.cpu_milli, prep.memory_mib, prep.kind) == (6000, 4608, "cpu")
    bert = pods["infer/bert-0"]  # the share annotation; node affinity In
    assert (bert.kind, bert.gpu_milli, bert.gpu_spec) == ("share", 250, ("NVIDIA-A100-SXM4-80GB", "Tesla-T4"))
    bert1 = pods["infer/bert-1"]  # NotIn T4 leaves the A100; the overhead is added
    assert (bert1.kind, bert1.gpu_spec, bert1.cpu_milli, bert1.memory_mib) == \
        ("one", ("NVIDIA-A100-SXM4-80GB",), 1250, 2168)
    etl = pods["batch/etl-0"]
    assert (etl.cpu_milli, etl.memory_mib, etl.qos, etl.phase, etl.creation_s) == (0, 0, "BestEffort", "Succeeded", 3600)
    assert trace.notes == ("1 node(s) were cordoned (spec.unschedulable): replayed as schedulable",
                           "left out 1 DaemonSet pod(s)", "left out 1 mirror (static) pod(s)")


def test_a_dump_becomes_the_csv_format(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["trace", "excerpt", str(FIXTURES / "cluster.json"), "--out", str(tmp_path / "o")])
    assert result.exit_code == 0, result.output
    again = read_trace(tmp_path / "o" / "pods.csv", tmp_path / "o" / "nodes.csv")
    dumped = read_trace(FIXTURES / "cluster.json")
    assert again.pods == dumped.pods
    assert [(n.name, n.cpu_milli, n.memory_mib, n.gpus, n.model) for n in again.nodes] == \
        [(n.name, n.cpu_milli, n.memory_mib, n.gpus, n.model) for n in dumped.nodes]


# -------------------------------------------------------------------------------------------- excerpts


def test_an_excerpt_keeps_shapes_in_proportion_and_is_seeded() -> None:
    trace = read_trace(TRACES / "openb_pod_list_default.csv", GPU_NODES)
    cut = excerpt(trace, 50, 300, seed=1)
    assert len(cut.nodes) == 50 and len(cut.pods) == 300
    assert excerpt(trace, 50, 300, seed=1) == cut and excerpt(trace, 50, 300, seed=2) != cut
    models = [n.model for n in cut.nodes]
    assert models.count("G2") == 23 and models.count("T4") == 17  # 549/1213 and 404/1213 of 50, by shape
    names = [p.name for p in cut.pods]
    assert names == sorted(names)  # the file's order
    assert inspect_trace(cut)["constraints"]["never_fit"]["pods"] == 0


# ------------------------------------------------------------------------------------------------- CLI


def test_trace_inspect_prints_the_figures_and_json() -> None:
    args = ["trace", "inspect", str(EXCERPT / "pods.csv"), "--nodes", str(EXCERPT / "nodes.csv")]
    text = CliRunner().invoke(main, args)
    assert text.exit_code == 0, text.output
    assert "GPU share         8" in text.output and "33.9 of 56 GPUs (60.5%)" in text.output
    as_json = CliRunner().invoke(main, [*args, "--json"])
    assert json.loads(as_json.output)["pods"]["by_kind"]["share"]["pods"] == 8
