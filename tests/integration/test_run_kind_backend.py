"""``cluster.backend: kind`` through ``hollowscale run`` on a machine without kind/Docker: the run stops at
the cluster phase with kind's own missing-tool message, writes an incomplete report, exit code 2."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml
from clirun import run_cli

pytestmark = pytest.mark.integration  # runs `hollowscale run` as a process

ROOT = Path(__file__).resolve().parents[2]


def test_kind_backend_without_kind_is_a_clear_incomplete_run(tmp_path: Path) -> None:
    doc = yaml.safe_load((ROOT / "scenarios" / "smoke.yaml").read_text())
    doc["cluster"] = {"backend": "kind", "namespace": "kind-check"}  # no kubeconfig: kind writes its own
    scen = tmp_path / "kind.yaml"
    scen.write_text(yaml.safe_dump(doc))
    r = run_cli([sys.executable, "-m", "hollowscale.run", str(scen), "--out", str(tmp_path / "out"), "--quiet"], 120,
                cwd=ROOT)
    assert r.returncode == 2, (r.stdout[-2000:], r.stderr[-2000:])
    summary = json.loads(((tmp_path / "out" / "latest").resolve() / "summary.json").read_text())
    assert summary["complete"] is False
    assert "cluster.backend kind cannot run here" in summary["incomplete_reason"]
    assert summary["timings"].get("cluster") is not None and "agents" not in summary["timings"]
