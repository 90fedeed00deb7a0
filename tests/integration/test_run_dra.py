"""A DRA scenario end to end on a cluster of its own (``hollowscale run``: DeviceClasses, the claims' dry run,
templates, hollow slices, the real scheduler and controller-manager, the claim timeline, figures, report).

The cluster is started here and reused by two runs: a small sharing run whose report must account for
every claim (none left allocated), and a run whose CEL selector does not compile, refused by the dry run
before any load.  A DeviceClass that exists before the run with the run's spec is used and left alone.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from clirun import run_cli

from hollow.dra import GPU_CLASS, device_class
from hollowscale.cluster.local import LocalCluster
from kubecore.config import load_endpoint
from kubecore.watch import session_for

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.integration


def scenario(cluster_dir: Path, name: str, selector: str) -> dict[str, Any]:
    return {
        "name": name, "cluster": {"backend": "local", "dir": str(cluster_dir), "namespace": name},
        "agents": {"ready_timeout_s": 60},
        "pools": [{"name": f"{name}-h100", "count": 3, "resources": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "2"},
                   "gpus": {"expose": "dra", "model": "h100-80gb", "sharing": "memory"},
                   "lifecycle": {"prepare_delay": "100ms"}}],
        "workloads": [
            {"name": "teach", "kind": "Job", "run_duration": {"dist": "uniform", "min": "4s", "max": "8s"},
             "roles": [{"name": "teacher", "replicas": 2, "resources": {"cpu": "1"},
                        "claim": {"device_class": GPU_CLASS, "memory": "20Gi"}}]},
            {"name": "train", "kind": "Job", "run_duration": "6s",
             "roles": [{"name": "worker", "resources": {"cpu": "2"},
                        "claim": {"device_class": GPU_CLASS, "selector": selector}}]}],
        "arrival": {"curve": "constant", "rate": 1, "duration_s": 12, "seed": 5},
        "measurements": {"settle_timeout_s": 90},
        "slo_defaults": False,
        "slos": [{"name": "released", "metric": "dra.claims_left_allocated", "op": "<=", "threshold": 0}],
    }


def test_dra_run_accounts_for_every_claim_and_a_bad_selector_stops_before_the_load(tmp_path: Path) -> None:
    local = LocalCluster(tmp_path / "cluster", profile="default")
    info = local.up(None, 120.0)
    try:
        endpoint = load_endpoint(info.kubeconfig)
        s = session_for(endpoint, 2)
        mine = s.post(f"{endpoint.server}/apis/resource.k8s.io/v1/deviceclasses", json=device_class(GPU_CLASS), timeout=30)
        assert mine.status_code == 201, mine.text
        uid = mine.json()["metadata"]["uid"]

        good = tmp_path / "dra-good.yaml"
        good.write_text(yaml.safe_dump(scenario(tmp_path / "cluster", "dra-good",
                                                "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0")))
        r = run_cli([sys.executable, "-m", "hollowscale.run", str(good), "--out", str(tmp_path / "out"), "--quiet"], 400,
                    cwd=ROOT)
        run_dir = (tmp_path / "out" / "latest").resolve()
        summary = json.loads((run_dir / "summary.json").read_text())
        assert summary["complete"], (summary.get("incomplete_reason"), r.stdout[-2000:], r.stderr[-2000:])
        d = summary["measurements"]["dra"]
        assert d["claims"]["total"] >= 10 and d["claims"]["allocated"] == d["claims"]["total"], d["claims"]
        assert d["integrity"]["not_in_timeline"] == 0 and d["claims_left_allocated"] == 0, d["integrity"]
        assert d["latency_ms"]["created_to_running"]["count"] == d["claims"]["total"]
        assert d["gpus_allocated"]["max"] > 0 and d["gpu_memory_allocated_gib"]["max"] > 0
        assert d["roles"]["teach/teacher"]["running_max"] >= 2
        sched = summary["measurements"]["dra_scheduler"]
        assert sched["pods_scheduled"] and sched["cycles"], sched
        # kube-scheduler times its plugins in a random 10% of cycles (pluginMetricsSamplePercent, fixed): with
        # ~20 cycles, none is sampled in about 1 run in 8, so the estimate's scale is checked either way
        if sched["cycles_sampled"]:
            assert "PreFilter" in sched["plugin_by_extension_point"], sched
            assert sched["sampling_scale"] == pytest.approx(sched["cycles"] / sched["cycles_sampled"], rel=0.1)
        else:
            assert sched["sampling_scale"] == 10.0, sched
        assert summary["passed"] and r.returncode == 0, summary["slos"]
        assert "## GPUs as DRA devices" in (run_dir / "summary.md").read_text()
        assert "plot-dra" in (run_dir / "report.html").read_text()
        # the class the run found (same spec) was used and left; nothing of the run's namespace is left
        got = s.get(f"{endpoint.server}/apis/resource.k8s.io/v1/deviceclasses/{GPU_CLASS}", timeout=30)
        assert got.ok and got.json()["metadata"]["uid"] == uid
        assert s.get(f"{endpoint.server}/api/v1/namespaces/dra-good", timeout=30).status_code in (404, 200)

        bad = tmp_path / "dra-bad.yaml"
        bad.write_text(yaml.safe_dump(scenario(tmp_path / "cluster", "dra-bad",
                                               "device.attributes['gpu.nvidia.com'].productName ==")))
        r = run_cli([sys.executable, "-m", "hollowscale.run", str(bad), "--out", str(tmp_path / "out2"), "--quiet"], 300,
                    cwd=ROOT)
        summary = json.loads(((tmp_path / "out2" / "latest").resolve() / "summary.json").read_text())
        assert r.returncode == 2 and not summary["complete"]
        reason = summary["incomplete_reason"]
        assert "do not pass the apiserver's dry run" in reason and "workloads[1].roles[0].claim" in reason, reason
        assert "compilation failed" in reason
        assert summary["timings"].get("load") is None  # refused before the load: nothing was submitted
    finally:
        local.down()
