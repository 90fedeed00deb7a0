"""Locust on its own against the real cluster: single process and --processes 2 (master + workers)."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from kubecore.config import load_endpoint
from kubecore.watch import session_for

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.integration


@pytest.mark.parametrize("processes", [1, 2])
def test_locust_alone_follows_the_curve(cluster, tmp_path: Path, processes: int) -> None:  # type: ignore[no-untyped-def]
    ns = f"loadgen-alone-{processes}"
    spec = {"name": "alone", "namespace": ns,
            "workloads": [{"name": "tiny", "kind": "Job", "run_duration": "1s",
                           "roles": [{"name": "w", "resources": {"cpu": "10m"}}]},
                          {"name": "solo", "kind": "Pod", "share": 0.5, "run_duration": "1s",
                           "roles": [{"name": "p", "resources": {"cpu": "10m"}}]}],
            "arrival": {"curve": "constant", "rate": 4, "duration_s": 8, "per_user_rate": 1}}
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(json.dumps(spec))  # JSON is valid YAML
    argv = [sys.executable, "-m", "locust", "-f", str(ROOT / "loadgen" / "locustfile.py"), "--headless",
            "--kubeconfig", str(cluster.kubeconfig), "--load-spec", str(spec_file), "--run-id", f"alone{processes}",
            "--csv", str(tmp_path / "l"), "--only-summary"]
    if processes > 1:
        argv += ["--processes", str(processes)]
    r = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    rows = {(row["Type"], row["Name"]): row for row in csv.DictReader((tmp_path / "l_stats.csv").open())}
    creates = sum(int(v["Request Count"]) for (t, _), v in rows.items() if t == "POST")
    assert sum(int(v["Failure Count"]) for (t, _), v in rows.items() if t == "POST") == 0
    assert 24 <= creates <= 40, creates  # 4/s for 8 s = 32, users start at random phases
    ep = load_endpoint(cluster.kubeconfig)
    s = session_for(ep, 1)
    sel = {"labelSelector": f"hollowscale.io/run=alone{processes}"}
    jobs = orjson.loads(s.get(f"{ep.server}/apis/batch/v1/namespaces/{ns}/jobs", params=sel, timeout=30).content)["items"]
    bare = [p for p in orjson.loads(s.get(f"{ep.server}/api/v1/namespaces/{ns}/pods", params=sel, timeout=30).content)["items"]
            if not p["metadata"].get("ownerReferences")]
    # Locust kills users at the end of the run (stop_timeout 0): a create already sent may succeed on
    # the server without ever being recorded, at most one per user, and never the other way round.
    assert creates <= len(jobs) + len(bare) <= creates + 4
    assert 0.45 < len(jobs) / creates < 0.9  # shares 1 : 0.5
    s.delete(f"{ep.server}/api/v1/namespaces/{ns}", timeout=30)
