"""bench_trace's arithmetic (tests/bench/bench_trace.py): the variants it builds, the figures over seeds, the
curve read at a point, and the Markdown.  No replay runs here (the replay is the integration tier's)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

BENCH = Path(__file__).resolve().parents[1] / "bench" / "bench_trace.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_trace_under_test", BENCH)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


bt = _load()


def _summary(seed: int, allocated: float, unallocated: float, first: float | None) -> dict[str, Any]:
    return {"seed": seed, "complete": True, "duration_s": 100.0 + seed, "timings": {"agents": 20.0, "replay": 60.0},
            "resources": {"cpu_cores": {"agent": 0.2, "kube-scheduler": 0.5 + seed / 10}},
            "modelled": ["a share is a claim of its milli-GPU"],
            "replay": {"at_100pct_arrived": {"allocated_pct": allocated, "unallocated_gpus": unallocated},
                       "first_failure": None if first is None else {"arrived_pct": first},
                       "end": {"allocated_pct": allocated + 1}, "pods": {"unschedulable": 10 * seed, "no_verdict": 0},
                       "scheduler": {"verdicts_per_s": 20.0, "replay_s": 60.0,
                                     "latency_ms": {"bound": {"p50": 10.0, "p99": 40.0 + seed}}},
                       "curves": {"gpu": {"0": 0.0, "50": 50.0, "100": allocated, "130": allocated + 1}},
                       "never_ran": {"share": {"cannot allocate all claims": seed}},
                       "checks": {"allocation_equals_apiserver": {"passed": True}, "pods_per_kind_equal_trace": None}}}


def test_the_variants_are_every_profile_with_every_gpu_mode() -> None:
    doc = bt.scenario_doc(bt.SCENARIO, ["default", "packing"], ["claims", "counted"], [1, 2], None)
    assert [v["name"] for v in doc["variants"]] == ["default-shared", "default-counted", "packing-shared",
                                                    "packing-counted"]
    assert doc["variants"][1] == {"name": "default-counted", "scheduler": {"profile": "default"}, "gpus": "counted",
                                  "gpu_sharing": False}
    spec = doc["workload"]["trace"]
    assert spec["seeds"] == [1, 2] and Path(spec["pods"]).is_absolute() and Path(spec["pods"]).is_file()


def test_a_curve_is_read_at_its_last_point_before_and_never_past_its_end() -> None:
    curve = {"0": 0.0, "50": 49.9, "97": 90.0}
    assert bt._curve_at(curve, 50) == 49.9 and bt._curve_at(curve, 95) == 49.9 and bt._curve_at(curve, 97) == 90.0
    assert bt._curve_at(curve, 100) is None  # the replay never got there


def test_figures_over_seeds_are_median_and_range_and_reasons_add_up() -> None:
    runs = [{"seed": s, "code": 0, "run_dir": f"/r/{s}", "summary": _summary(s, a, u, f)}
            for s, a, u, f in ((1, 90.0, 600.0, 88.0), (2, 92.0, 500.0, None), (3, 91.0, 550.0, 90.0))]
    v = bt.summarize(runs)
    assert v["allocated_pct_at_100_arrived"] == {"median": 91.0, "min": 90.0, "max": 92.0, "n": 3}
    assert v["first_failure_arrived_pct"] == {"median": 89.0, "min": 88.0, "max": 90.0, "n": 2}  # seed 2 never failed
    assert v["gpu_allocation_curve"]["100"]["median"] == 91.0 and v["gpu_allocation_curve"]["130"]["max"] == 93.0
    assert v["never_ran_total_over_seeds"] == {"share": {"cannot allocate all claims": 6}}
    assert v["checks_passed"] == {"allocation_equals_apiserver": [True, True, True], "pods_per_kind_equal_trace": []}
    assert v["cpu_cores"]["kube-scheduler"]["max"] == 0.8
    doc = {"facts": {"date": "d", "machine": {"cpu_model": "c", "cores": 2, "memory_gib": 24,
                                              "load_average_1_5_15": [1, 1, 1]}, "versions": {"kubernetes": "v"}},
           "command": "x", "trace": "t", "protocol": "p", "seeds": [1, 2, 3], "excerpt": None, "wall_s": 10.0,
           "variants": {"default-shared": v}}
    md = bt.markdown(doc)
    assert "| default-shared | 91.00 (90.00-92.00) | 550.0 (500.0-600.0) | 89.00 (88.00-90.00) |" in md
    assert "| 100 | 91.00 (90.00-92.00) |" in md and "a share is a claim of its milli-GPU" in md


def test_resume_keeps_finished_replays_whose_summary_is_still_there(tmp_path: Path) -> None:
    import json
    runs = {}
    for name in ("kept", "interrupted", "gone", "other-variant", "other-seed"):
        runs[name] = tmp_path / name
        runs[name].mkdir()
        if name != "gone":
            (runs[name] / "summary.json").write_text(json.dumps(_summary(1, 90.0, 600.0, None)))
    replays = [{"variant": "default-shared", "seed": 1, "exit_code": 0, "run_dir": str(runs["kept"])},
               {"variant": "default-shared", "seed": 2, "exit_code": 130, "run_dir": str(runs["interrupted"])},
               {"variant": "packing-shared", "seed": 1, "exit_code": 1, "run_dir": str(runs["gone"])},
               {"variant": "removed", "seed": 1, "exit_code": 0, "run_dir": str(runs["other-variant"])},
               {"variant": "packing-shared", "seed": 9, "exit_code": 0, "run_dir": str(runs["other-seed"])}]
    out = tmp_path / "trace.json"
    out.write_text(json.dumps({"replays": replays}))
    kept = bt.earlier_replays(out, {"default-shared", "packing-shared"}, [1, 2])
    assert [(k["variant"], k["seed"]) for k in kept] == [("default-shared", 1)]
    assert kept[0]["summary"]["seed"] == 1 and kept[0]["code"] == 0
    assert bt.summarize(kept)["allocated_pct_at_100_arrived"]["n"] == 1
    assert bt.earlier_replays(tmp_path / "absent.json", {"default-shared"}, [1]) == []
