"""Bad traces are refused before anything starts, each problem with file, line and column (CSV) or field
(a cluster dump), every problem at once, and nothing left behind (issue 28, part 8).

Each case changes one thing in a copy of the golden excerpt (``tests/fixtures/trace/excerpt/``) and
names the exact line the user sees.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from hollowscale.cli import main
from hollowscale.trace import TraceError, read_trace

ROOT = Path(__file__).resolve().parents[2]
EXCERPT = ROOT / "tests" / "fixtures" / "trace" / "excerpt"
DUMP = ROOT / "tests" / "fixtures" / "trace" / "cluster.json"
PODS = (EXCERPT / "pods.csv").read_text()
NODES = (EXCERPT / "nodes.csv").read_text()
POD2 = "openb-pod-0381,88000,327680,8,1000,,Burstable,Failed,10178857,10179275,10178858"  # line 2 of pods.csv
POD3 = "openb-pod-0646,4000,30517,1,230,,BE,Running,10277009,10277213,10277009"  # line 3
NODE3 = "openb-node-0253,96000,393216,8,G2"  # line 3 of nodes.csv


def _refused(tmp_path: Path, pods: str = PODS, nodes: str = NODES) -> list[str]:
    (tmp_path / "pods.csv").write_text(pods)
    (tmp_path / "nodes.csv").write_text(nodes)
    with pytest.raises(TraceError) as err:
        read_trace(tmp_path / "pods.csv", tmp_path / "nodes.csv")
    return [line.replace(str(tmp_path) + "/", "") for line in str(err.value).splitlines()]


@pytest.mark.parametrize(("old", "new", "expected"), [
    # the header: a missing column, a misspelled one, one named twice
    ("name,cpu_milli,memory_mib,num_gpu,gpu_milli,", "name,cpu_milli,num_gpu,gpu_milli,", [
        "pods.csv:1: memory_mib: missing column (memory requested, >= 0); the header has name,cpu_milli,num_gpu,"
        "gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time"]),
    ("name,cpu_milli,memory_mib,num_gpu,gpu_milli,", "name,cpu_mili,memory_mib,num_gpu,gpu_milli,", [
        "pods.csv:1:2: cpu_mili: unknown column (did you mean 'cpu_milli'?); a pod file has name, cpu_milli, "
        "memory_mib, num_gpu, gpu_milli, gpu_spec, qos, pod_phase, creation_time, deletion_time, scheduled_time",
        "pods.csv:1: cpu_milli: missing column (CPU requested, >= 0); the header has name,cpu_mili,memory_mib,num_gpu,"
        "gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time"]),
    ("qos,pod_phase,", "qos,qos,", ["pods.csv:1:8: qos: column named twice"]),
    # cells: not a number, negative, a fraction, a wrong phase, a missing field
    (POD3, POD3.replace(",4000,", ",four,"),
     ["pods.csv:3:2: cpu_milli: expected a whole number >= 0, got 'four'"]),
    (POD3, POD3.replace(",30517,", ",-30517,"),
     ["pods.csv:3:3: memory_mib: expected a whole number >= 0, got a negative value '-30517'"]),
    (POD3, POD3.replace(",230,", ",23.5,"), ["pods.csv:3:5: gpu_milli: expected a whole number >= 0, got '23.5'"]),
    (POD3, POD3.replace(",4000,", ",,"), ["pods.csv:3:2: cpu_milli: is empty; expected a whole number >= 0"]),
    (POD3, POD3.replace("Running", "running"),
     ["pods.csv:3:8: pod_phase: expected one of Pending, Running, Succeeded, Failed, Unknown or empty, got 'running'"]),
    (POD3, POD3.replace(",BE,", ","), ["pods.csv:3: expected 11 fields (as the header), got 10"]),
    (POD3, POD3.replace(",10277213,", ",10277000,"),
     ["pods.csv:3:10: deletion_time: expected >= creation_time (10277009), got 10277000"]),
    # shares: above 1000, on a multi-GPU pod, on a pod without GPUs
    (POD3, POD3.replace(",230,", ",1200,"), [
        "pods.csv:3:5: gpu_milli: expected 1..1000 milli-GPU for a one-GPU pod (a share above 1000 is more than a "
        "GPU), got 1200"]),
    (POD2, POD2.replace(",8,1000,", ",8,500,"), [
        "pods.csv:2:5: gpu_milli: expected 1000 for a pod of 8 GPUs (a GPU share is for one GPU only), got 500"]),
    (POD3, POD3.replace(",1,230,", ",0,230,"),
     ["pods.csv:3:5: gpu_milli: expected 0 for a pod without GPUs (num_gpu 0), got 230"]),
    # a pod larger than every node, alone or in one dimension
    (POD2, POD2.replace(",88000,", ",129000,"),
     ["pods.csv:2:2: cpu_milli: asks 129000 milli-CPU; the largest node has 128000"]),
    (POD2, POD2.replace(",8,1000,", ",16,1000,"), ["pods.csv:2:4: num_gpu: asks 16 GPUs; the largest node has 8"]),
    # a constraint on a model no node has
    (POD3, POD3.replace(",230,,", ",230,A100|T4,"),
     ["pods.csv:3:6: gpu_spec: unknown GPU model 'A100'; the nodes have G2, G3, P100, T4"]),
    (POD3, POD3.replace(",230,,", ",230,T4;P100,"),
     ["pods.csv:3:6: gpu_spec: expected GPU models separated by '|', got 'T4;P100'"]),
    # a pod named twice
    (POD3, POD3.replace("openb-pod-0646", "openb-pod-0381"),
     ["pods.csv:3:1: name: pod 'openb-pod-0381' named twice (first at line 2)"]),
])
def test_a_bad_pod_list_is_refused_with_line_and_column(tmp_path: Path, old: str, new: str,
                                                         expected: list[str]) -> None:
    assert old in PODS
    assert _refused(tmp_path, pods=PODS.replace(old, new, 1)) == expected


@pytest.mark.parametrize(("old", "new", "expected"), [
    (NODE3, NODE3.replace(",G2", ","), ["nodes.csv:3:5: model: is empty on a node with 8 GPUs; expected the GPUs' model"]),
    (NODE3, NODE3.replace(",96000,", ",0,"), ["nodes.csv:3:2: cpu_milli: expected a whole number >= 1, got '0'"]),
    (NODE3, NODE3.replace(",G2", ",G 2"), [
        "nodes.csv:3:5: model: expected a GPU model (letters, digits, '-', '_', '.'; at most 63), got 'G 2'"]),
    ("sn,cpu_milli", "name,cpu_milli", [
        "nodes.csv:1:1: name: unknown column; a node file has sn, cpu_milli, memory_mib, gpu, model",
        "nodes.csv:1: sn: missing column (the node's name (non-empty, unique)); the header has name,cpu_milli,"
        "memory_mib,gpu,model"]),
])
def test_a_bad_node_list_is_refused_with_line_and_column(tmp_path: Path, old: str, new: str,
                                                         expected: list[str]) -> None:
    assert old in NODES
    assert _refused(tmp_path, nodes=NODES.replace(old, new, 1)) == expected


def test_a_pod_no_node_holds_in_all_dimensions_together(tmp_path: Path) -> None:
    nodes = "sn,cpu_milli,memory_mib,gpu,model\nt4,104000,524288,2,T4\ng2,96000,393216,8,G2\n"
    pods = PODS.splitlines()[0] + "\n" + POD2.replace(",88000,", ",104000,") + "\n"  # a T4's CPUs, a G2's GPUs
    assert _refused(tmp_path, pods=pods, nodes=nodes) == [
        "pods.csv:2:1: name: asks 104000 milli-CPU, 327680 MiB and 8 GPUs together; no node has all of them"]


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    pods = PODS.replace(POD3, POD3.replace(",4000,", ",x,")).replace(POD2, POD2.replace(",8,1000,", ",8,10,"))
    assert _refused(tmp_path, pods=pods) == [
        "pods.csv:2:5: gpu_milli: expected 1000 for a pod of 8 GPUs (a GPU share is for one GPU only), got 10",
        "pods.csv:3:2: cpu_milli: expected a whole number >= 0, got 'x'"]


def test_a_long_list_of_problems_is_cut_and_counted(tmp_path: Path) -> None:
    lines = PODS.splitlines()
    bad = [lines[0]] + [line.replace(",Running,", ",running,").replace(",Failed,", ",failed,")
                        .replace(",Pending,", ",pending,").replace(",Succeeded,", ",done,") for line in lines[1:]] * 2
    got = _refused(tmp_path, pods="\n".join(bad) + "\n")
    assert len(got) == 41 and got[-1] == "pods.csv: ... and 20 more problems"


def test_empty_files_and_a_missing_node_list(tmp_path: Path) -> None:
    assert _refused(tmp_path, pods="") == [
        "pods.csv:1: is empty; expected a header line (name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,"
        "pod_phase,creation_time,deletion_time,scheduled_time)"]
    assert _refused(tmp_path, pods=PODS.splitlines()[0] + "\n") == ["pods.csv:1: has a header and no pods"]
    (tmp_path / "p.csv").write_text(PODS)
    with pytest.raises(TraceError, match="a CSV pod list needs a node list"):
        read_trace(tmp_path / "p.csv")
    with pytest.raises(TraceError, match="no such node file"):
        read_trace(tmp_path / "p.csv", tmp_path / "absent.csv")


# ------------------------------------------------------------------------------------------ a dump


def _dump(tmp_path: Path, change: Any) -> list[str]:
    doc = json.loads(DUMP.read_text())
    change(doc["items"])
    (tmp_path / "cluster.json").write_text(json.dumps(doc))
    with pytest.raises(TraceError) as err:
        read_trace(tmp_path / "cluster.json")
    return [line.replace(str(tmp_path) + "/", "") for line in str(err.value).splitlines()]


def _pod(items: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next(i for i in items if i["kind"] == "Pod" and i["metadata"]["name"] == name)


def test_a_bad_dump_is_refused_with_its_field(tmp_path: Path) -> None:
    def bad_cpu(items: list[dict[str, Any]]) -> None:
        _pod(items, "prep-0")["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "two"

    assert _dump(tmp_path, bad_cpu) == [
        "cluster.json: items[7] (Pod train/prep-0).spec.containers[0].resources.requests.cpu: expected a Kubernetes "
        "quantity such as '500m', '64Gi' or '8', got 'two'"]

    def big_share(items: list[dict[str, Any]]) -> None:
        _pod(items, "bert-0")["metadata"]["annotations"]["alibabacloud.com/gpu-milli"] = "1500"

    assert _dump(tmp_path, big_share) == [
        "cluster.json: items[8] (Pod infer/bert-0).metadata.annotations[alibabacloud.com/gpu-milli]: expected 1..1000 "
        "milli-GPU for a one-GPU pod (a share above 1000 is more than a GPU), got 1500"]

    def unknown_model(items: list[dict[str, Any]]) -> None:
        _pod(items, "llm-0")["spec"]["nodeSelector"]["nvidia.com/gpu.product"] = "NVIDIA-H100-80GB-HBM3"

    assert _dump(tmp_path, unknown_model) == [
        "cluster.json: items[6] (Pod train/llm-0).spec (nodeSelector or node affinity on the model label): unknown "
        "GPU model 'NVIDIA-H100-80GB-HBM3'; the nodes have NVIDIA-A100-SXM4-80GB, Tesla-T4"]

    def too_big(items: list[dict[str, Any]]) -> None:
        _pod(items, "llm-0")["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "9"

    assert _dump(tmp_path, too_big) == [
        "cluster.json: items[6] (Pod train/llm-0).resources (GPUs): asks 9 GPUs; the largest node has 8"]


def test_a_dump_that_is_not_json_names_line_and_column(tmp_path: Path) -> None:
    (tmp_path / "cluster.json").write_text('{"kind": "List",\n "items": [}\n')
    with pytest.raises(TraceError) as err:
        read_trace(tmp_path / "cluster.json")
    assert str(err.value) == f"{tmp_path}/cluster.json:2:12: not JSON: Expecting value"


def test_nothing_is_left_behind(tmp_path: Path) -> None:
    """A refused trace writes nothing: ``trace excerpt`` makes no folder and no file."""
    (tmp_path / "pods.csv").write_text(PODS.replace(POD3, POD3.replace(",230,", ",1200,")))
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["trace", "excerpt", str(tmp_path / "pods.csv"), "--nodes",
                                       str(EXCERPT / "nodes.csv"), "--out", str(out), "--pod-count", "5"])
    assert result.exit_code == 1
    assert "invalid trace (1 problem(s)):" in result.output and "pods.csv:3:5: gpu_milli:" in result.output
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["pods.csv"]
