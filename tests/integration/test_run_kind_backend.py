"""``cluster.backend: kind`` through ``hollowscale run``, for real: the smoke scenario against a kind cluster of
nodes built here (hollowscale.kindnode) in hollowscale's own podman, shaped by ``kind-config.yaml``
(a control plane and two workers), and nothing of it left afterwards."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml
from clirun import run_cli

from hollowscale.kindnode import firewall
from hollowscale.kindnode.engine import ensure_podman

# builds the node image when it is not cached and runs a whole scenario on kind: make test-e2e
pytestmark = [pytest.mark.integration, pytest.mark.root, pytest.mark.e2e]

ROOT = Path(__file__).resolve().parents[2]


def test_smoke_scenario_on_a_kind_cluster_built_here(tmp_path: Path) -> None:
    podman = ensure_podman()
    if podman.run(["container", "exists", "hollowscale-control-plane"], check=False).returncode == 0:
        pytest.fail("a kind cluster named hollowscale already runs in hollowscale's podman: the run would reuse "
                    "it, and this test checks a cluster the run creates", pytrace=False)
    modules_before = Path("/lib/modules").exists()
    fw_before = firewall.snapshot()
    doc = yaml.safe_load((ROOT / "scenarios" / "smoke.yaml").read_text())
    doc["cluster"] = {"backend": "kind", "namespace": "kind-smoke"}
    scen = tmp_path / "kind.yaml"
    scen.write_text(yaml.safe_dump(doc))
    r = run_cli([sys.executable, "-m", "hollowscale.run", str(scen), "--out", str(tmp_path / "out"), "--quiet"], 1800,
                cwd=ROOT)
    run_dir = (tmp_path / "out" / "latest").resolve()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert r.returncode == 0, (summary.get("incomplete_reason"), r.stdout[-2000:], r.stderr[-3000:])
    assert summary["complete"] is True
    config = yaml.safe_load((run_dir / "kind-config.yaml").read_text())
    assert [n["role"] for n in config["nodes"]] == ["control-plane", "worker", "worker"]
    assert all(n["image"].startswith("localhost/hollowscale/kind-node:") for n in config["nodes"])
    # nothing left: no node container, no volume, no kind network, the firewall and /lib/modules as before
    assert not podman.run(["ps", "--all", "--quiet"]).stdout.strip()
    assert not podman.run(["volume", "ls", "--quiet"]).stdout.strip()
    assert podman.run(["network", "exists", "kind"], check=False).returncode != 0
    assert {t: r.chains for t, r in firewall.snapshot().items()} == {t: r.chains for t, r in fw_before.items()}
    assert Path("/lib/modules").exists() == modules_before
