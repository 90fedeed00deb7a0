"""The shipped DRA scenarios end to end, shortened, each variant on a fresh local cluster (long: make test-e2e).

* ``gpu-sharing.yaml``: teachers packed by memory onto shared inference GPUs fit at least twice as many at
  once as whole-GPU teachers on the same pools; the report shows pods per GPU and GPU memory allocated;
  every claim is accounted for and none stays allocated.
* ``dra-vs-counted.yaml``: the same jobs as counted GPUs, as claims and as ``nvidia.com/gpu`` through the
  extended-resource mapping, in one comparison; the claims come from templates in one variant and from
  the scheduler in the other, and the counted one has none.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from clirun import run_cli

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.integration, pytest.mark.e2e]


def _run(tmp_path: Path, doc: dict[str, Any], timeout_s: int) -> tuple[Path, Any]:
    scen = tmp_path / f"{doc['name']}.yaml"
    scen.write_text(yaml.safe_dump(doc, sort_keys=False))
    out = tmp_path / "reports"
    r = run_cli([sys.executable, "-m", "hollowscale.run", str(scen), "--out", str(out), "--quiet"], timeout_s, cwd=ROOT)
    return (out / "latest").resolve(), r


def _check_claims(summary: dict[str, Any]) -> dict[str, Any]:
    d = summary["measurements"]["dra"]
    assert d["integrity"]["not_in_timeline"] == 0 and d["claims_left_allocated"] == 0, d["integrity"]
    assert d["claims"]["allocated_at_end"] == 0, d["claims"]
    return d


def test_gpu_sharing_fits_twice_the_teachers(tmp_path: Path) -> None:
    doc = yaml.safe_load((ROOT / "scenarios" / "gpu-sharing.yaml").read_text())
    doc["name"] = "gpu-sharing-e2e"
    doc["arrival"]["duration_s"] = "90s"
    doc["measurements"] = {"settle_timeout_s": "200s"}
    doc["timeout_s"] = "12m"
    parent, r = _run(tmp_path, doc, 1500)
    comparison = json.loads((parent / "comparison.json").read_text())
    assert all(v["complete"] for v in comparison["variants"]), (comparison, r.stdout[-3000:], r.stderr[-3000:])
    shared = json.loads((parent / "memory-shares" / "summary.json").read_text())
    whole = json.loads((parent / "whole-gpus" / "summary.json").read_text())
    ds, dw = _check_claims(shared), _check_claims(whole)
    teachers_shared = ds["roles"]["distill/teacher"]["running_max"]
    teachers_whole = dw["roles"]["distill/teacher"]["running_max"]
    assert teachers_shared >= 2 * teachers_whole, (teachers_shared, teachers_whole)
    assert ds["pods_per_gpu"]["max"] >= 2 and dw["pods_per_gpu"]["max"] == 1
    assert ds["gpu_memory_allocated_gib"]["max"] > 0
    md = (parent / "comparison.md").read_text()
    assert "distill/teacher: most running at once" in md and "DRA pods per busy GPU, max" in md
    assert "pods per busy GPU" in (parent / "memory-shares" / "summary.md").read_text()


def test_dra_vs_counted_three_ways(tmp_path: Path) -> None:
    doc = yaml.safe_load((ROOT / "scenarios" / "dra-vs-counted.yaml").read_text())
    doc["name"] = "dra-vs-counted-e2e"
    doc["pools"][0]["count"] = 6
    doc["pools"][1]["count"] = 4
    doc["arrival"].update({"rate": 1, "duration_s": "40s"})
    doc["measurements"] = {"settle_timeout_s": "150s"}
    doc["timeout_s"] = "10m"
    parent, r = _run(tmp_path, doc, 1800)
    comparison = json.loads((parent / "comparison.json").read_text())
    assert [v["name"] for v in comparison["variants"]] == ["counted", "claims", "extended"]
    assert all(v["complete"] for v in comparison["variants"]), (comparison, r.stdout[-3000:], r.stderr[-3000:])
    by = {v: json.loads((parent / v / "summary.json").read_text()) for v in ("counted", "claims", "extended")}
    assert by["counted"]["measurements"]["dra"]["claims"]["total"] == 0
    claims = _check_claims(by["claims"])
    assert claims["claims"]["by_source"] == {"template": claims["claims"]["total"]} and claims["claims"]["total"] > 0
    extended = _check_claims(by["extended"])
    assert extended["claims"]["by_source"] == {"extended": extended["claims"]["total"]} and extended["claims"]["total"] > 0
    for v in by.values():
        assert v["measurements"]["jobs"]["unfinished"] == 0, v["measurements"]["jobs"]
