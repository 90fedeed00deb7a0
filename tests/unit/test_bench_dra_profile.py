"""bench_dra's reading of kube-apiserver's profile (``--parts profile``) and ``--merge``'s carrying over."""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

BENCH = Path(__file__).resolve().parents[1] / "bench" / "bench_dra.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_dra_under_test", BENCH)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


bd = _load()
import apiserver_profile as ap  # noqa: E402  (tests/bench is on the path once bench_dra is loaded)

TOP = """File: kube-apiserver
Showing nodes accounting for 40s, 100% of 40s total
      flat  flat%   sum%        cum   cum%
     0.01s 0.025%  0.1%     20.00s 50.00%  k8s.io/apiserver/pkg/endpoints/handlers.CreateResource.createHandler.func1
"""


def test_total_sample_seconds_in_every_unit_pprof_prints() -> None:
    assert ap.total_sample_s(TOP) == 40.0
    assert ap.total_sample_s("Showing nodes accounting for 1s, 10% of 1.5mins total") == 90.0
    assert ap.total_sample_s("Showing nodes accounting for 5ms, 10% of 850ms total") == 0.85
    assert ap.total_sample_s("no header") is None


def test_focused_seconds_read_with_or_without_a_unit() -> None:
    assert ap._SHOWING.search("Active filters:\n   focus=x\nShowing nodes accounting for 6.04s, 30.38% of 19.88s "
                              "total").group(1) == "6.04"
    m = ap._SHOWING.search("Showing nodes accounting for 0, 0% of 19.88s total")
    assert m.group(1) == "0" and m.group(2) is None


def test_profile_rows_are_patterns_pprof_takes() -> None:
    import re
    for _, _, rx in bd.PROFILE_ROWS:
        re.compile(rx)
    names = {key for key, _, _ in bd.PROFILE_ROWS}
    assert {"create_requests", "update_requests", "patch_requests", "resourceslice_strategy"} <= names


def _profile(variant: str, apiserver_cpu_s: float, cpu: dict[str, float], requests: dict[str, int]) -> dict[str, Any]:
    rows = {key: 0.0 for key, _, _ in bd.PROFILE_ROWS}
    rows.update(cpu)
    return {"variant": variant, "nodes": 100, "window_s": 20, "registration_s": 19.0, "apiserver_cpu_s": apiserver_cpu_s,
            "requests": requests, "profile": {"file": "x", "cpu_s": rows, "sample_s": apiserver_cpu_s},
            "steady": {"seconds": 20.0, "busy_cores": 1.99, "apiserver_cores": 1.3, "writes_per_s": {"PUT leases": 600.0}}}


def test_profile_summary_gives_cpu_per_write_the_slices_checks_and_the_write_floor() -> None:
    counted = _profile("counted", 20.0, {"create_requests": 5.0},
                       {"POST nodes": 100, "PATCH nodes": 4, "GET nodes": 7})
    slices = _profile("slices", 60.0, {"create_requests": 18.0, "resourceslice_strategy": 6.5, "update_requests": 4.0,
                                        "patch_requests": 1.0},
                      {"POST nodes": 100, "POST leases": 100, "POST resourceslices": 100, "PUT leases": 96, "PATCH nodes": 4})
    got = bd.profile_summary([counted, slices])
    assert got["counted"]["writes"] == 104 and got["slices"]["writes"] == 400  # reads are not writes
    assert got["counted"]["apiserver_ms_per_write"] == round(20.0 / 104 * 1000, 3)
    assert got["counted"]["create_handler_ms"] == 50.0 and got["slices"]["create_handler_ms"] == 60.0
    assert got["slices"]["heartbeat_cpu_s"] == 5.0 and got["slices"]["lease_renewals"] == 96
    assert got["slice_checks_ms"] == 65.0  # 6.5 CPU-s over 100 slices
    assert got["write_floor_ratio"] == round(204 / 104, 2)
    md = "\n".join(bd.profile_markdown({"profile": [counted, slices], "summary": {"profile": got}}))
    assert "| create requests (handlers.CreateResource, all goroutines) | 5.0 | 18.0 |" in md
    assert f"make {got['write_floor_ratio']}x its writes" in md
    assert "writes/s PUT leases 600.0" in md


def test_profile_summary_without_a_profile_is_none() -> None:
    assert bd.profile_summary([{"variant": "counted", "profile": {"note": "no apiserver profile"}}]) is None


def test_merge_keeps_earlier_notes_and_the_profile_it_does_not_rerun(tmp_path: Path) -> None:
    params = {"repeats": 3, "init_pods": 2500, "measured_pods": 2500, "gpus_per_node": 10}
    earlier = {"params": params, "command": "python bench_dra.py", "notes": ["default", "why a row was rerun"],
               "facts": {"date": "2026-12-05T00:00:00+00:00", "machine": {"load_average_1_5_15": [1, 1, 1]}},
               "throughput": [{"size_nodes": 500, "variant": "counted"}], "registration": [],
               "profile": [{"variant": "counted"}]}
    path = tmp_path / "dra.json"
    path.write_text(json.dumps(earlier))
    doc: dict[str, Any] = {"params": params, "notes": ["default"], "throughput": [], "registration": []}
    args = argparse.Namespace(sizes="5000", variants="shared")
    bd.merge_earlier(doc, path, args, ["throughput"])
    assert doc["notes"] == ["default", "why a row was rerun"]
    assert doc["profile"] == [{"variant": "counted"}]
    assert doc["throughput"][0]["measured"] == "2026-12-05T00:00:00+00:00"
    doc2: dict[str, Any] = {"params": params, "notes": [], "throughput": [], "registration": []}
    bd.merge_earlier(doc2, path, args, ["profile"])
    assert "profile" not in doc2
