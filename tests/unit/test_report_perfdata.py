"""PerfData output: ClusterLoader2's shape, units and labels, perfdash's file names, and a round trip."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

from hollowscale.report.perfdata import (
    API_PREFIX,
    GENERIC_PREFIX,
    POD_STARTUP_PREFIX,
    flat_figures,
    read_perfdata,
    unit_of,
    write_perfdata,
)

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "compare"


def summary() -> dict[str, Any]:
    return {
        "scenario": "smoke", "started_at": "2026-12-01T17:54:09.549Z", "run_id": "r1",
        "measurements": {
            "pod_startup_latency_ms": {"p50": 126.8, "p90": 481.0, "p99": 2284.1, "count": 43},
            "pod_scheduling_latency_ms": {"p50": 63.2, "p90": 210.9, "p99": 1241.0, "count": 43},
            "scheduling_throughput_pods_per_s": {"avg": 2.255, "p50": 2.0, "max": 9.0, "pods": 43, "window_s": 19.07},
            "api_latency_ms": {"POST": {"p50": 34.8, "p99": 1114.5, "count": 223.9},
                               "DELETE": {"p50": None, "p99": None, "count": 0.0}},
            "jobs": {"submitted": 26, "completed": 26, "failed": 0,
                     "by_workload": {"distill": {"submitted": 12, "completed": 12, "failed": 0}}},
            "gpu_allocation_pct": {"avg": 17.4, "max": 31.7},
            "components": {"by_job": {"etcd": {"cpu_cores_avg": 0.19, "rss_mib_max": 181.1}},
                           "queries": {"cpu_cores_avg": "sum by (job) (rate(process_cpu_seconds_total[1m]))"}},
            "crosscheck": {"agree": True, "verdict": "agree", "diff_pct": 0.0},
            "batch": {"wasted_gpu_seconds": 12.5},
            "scalar_figure": 3,
        },
    }


def load(folder: Path) -> dict[str, dict[str, Any]]:
    return {p.name: json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))}


def test_shape_is_cl2_perfdata(tmp_path: Path) -> None:
    paths = write_perfdata(tmp_path, summary())
    assert paths and all(p.parent == tmp_path / "perfdata" for p in paths)
    for name, doc in load(tmp_path / "perfdata").items():
        assert set(doc) == {"version", "dataItems"}, name
        assert doc["version"] in ("v1", "1.0")
        for item in doc["dataItems"]:
            assert set(item) == {"data", "unit", "labels"}
            assert isinstance(item["unit"], str)
            assert item["data"] and all(isinstance(v, float) for v in item["data"].values())
            assert all(isinstance(k, str) and isinstance(v, str) for k, v in item["labels"].items())


def test_file_names_are_what_perfdash_matches(tmp_path: Path) -> None:
    write_perfdata(tmp_path, summary())
    names = set(load(tmp_path / "perfdata"))
    stamp = "20261201T175409Z"
    assert f"{POD_STARTUP_PREFIX}_smoke_{stamp}.json" in names
    assert f"{API_PREFIX}_smoke_{stamp}.json" in names
    assert f"{GENERIC_PREFIX} SchedulingThroughputPodsPerS_smoke_{stamp}.json" in names
    for n in names:
        assert ":" not in n  # actions/upload-artifact refuses ':' in names
        if n.startswith(GENERIC_PREFIX + " "):  # perfdash cuts the metric name at the first '_'
            assert re.fullmatch(rf"{GENERIC_PREFIX} [A-Za-z0-9]+_smoke_{stamp}\.json", n), n


def test_pod_startup_and_api_items_match_cl2(tmp_path: Path) -> None:
    write_perfdata(tmp_path, summary())
    docs = load(tmp_path / "perfdata")
    startup = docs[f"{POD_STARTUP_PREFIX}_smoke_20261201T175409Z.json"]
    assert startup["version"] == "1.0"  # util.LatencyMapToPerfData
    by_metric = {i["labels"]["Metric"]: i for i in startup["dataItems"]}
    assert set(by_metric) == {"pod_startup", "create_to_schedule"}
    assert by_metric["pod_startup"] == {"data": {"Perc50": 126.8, "Perc90": 481.0, "Perc99": 2284.1}, "unit": "ms",
                                        "labels": {"Metric": "pod_startup", "Count": "43"}}
    api = docs[f"{API_PREFIX}_smoke_20261201T175409Z.json"]
    assert api["version"] == "v1"  # currentAPICallMetricsVersion
    assert api["dataItems"] == [{"data": {"Perc50": 34.8, "Perc99": 1114.5}, "unit": "ms",
                                 "labels": {"Verb": "POST", "Count": "223.9"}}]  # no p90 invented, no null written


def test_units_and_data_keys(tmp_path: Path) -> None:
    write_perfdata(tmp_path, summary())
    items = [i for doc in load(tmp_path / "perfdata").values() for i in doc["dataItems"]]
    unit = {(i["labels"].get("Metric"), tuple(sorted(i["data"]))): i["unit"] for i in items}
    assert unit[("scheduling_throughput_pods_per_s", ("Average", "Max", "Perc50"))] == "1/s"
    assert unit[("scheduling_throughput_pods_per_s", ("pods",))] == ""
    assert unit[("scheduling_throughput_pods_per_s", ("window_s",))] == "s"
    assert unit[("components.by_job.etcd", ("cpu_cores_avg",))] == "cores"
    assert unit[("components.by_job.etcd", ("rss_mib_max",))] == "MiB"
    assert unit[("gpu_allocation_pct", ("Average", "Max"))] == "%"
    assert unit[("jobs.by_workload.distill", ("completed", "failed", "submitted"))] == ""
    assert unit[("batch", ("wasted_gpu_seconds",))] == "s"
    assert unit[("scalar_figure", ("Value",))] == ""
    # strings and booleans are not figures
    assert not any("verdict" in i["data"] or "agree" in i["data"] for i in items)
    assert unit_of("job_completion_time_s.p99") == "s" and unit_of("api_latency_slo_ms.mutating.count") == ""


def test_round_trip_holds_every_figure(tmp_path: Path) -> None:
    s = summary()
    write_perfdata(tmp_path, s)
    assert read_perfdata(tmp_path / "perfdata") == flat_figures(s["measurements"])


def test_round_trip_of_a_recorded_real_run(tmp_path: Path) -> None:
    # a real run's summary (recorded by the nightly from a real smoke run)
    path = Path(__file__).resolve().parents[1] / "fixtures" / "nightly" / "baseline" / "runs" / "smoke" / "01" / "summary.json"
    s = json.loads(path.read_text())
    write_perfdata(tmp_path, s)
    back = read_perfdata(tmp_path / "perfdata")
    assert back == flat_figures(s["measurements"])
    assert back["pod_startup_latency_ms.p99"] == s["measurements"]["pod_startup_latency_ms"]["p99"]
    assert len(back) > 50


def test_rewrite_leaves_no_stale_files(tmp_path: Path) -> None:
    write_perfdata(tmp_path, summary())
    s = summary()
    s["started_at"] = "2026-12-02T00:00:00Z"
    write_perfdata(tmp_path, s)
    assert all("20261202T000000Z" in n for n in load(tmp_path / "perfdata"))


def test_rewrite_removes_only_the_files_the_last_write_made(tmp_path: Path) -> None:
    first = write_perfdata(tmp_path, summary())
    theirs = tmp_path / "perfdata" / "someone-elses.json"
    theirs.write_text("{}")  # not written by write_perfdata: never removed, never read as PerfData
    s = summary()
    s["started_at"] = "2026-12-02T00:00:00Z"
    second = write_perfdata(tmp_path, s)
    assert not any(p.exists() for p in first) and all(p.exists() for p in second) and theirs.exists()
    assert read_perfdata(tmp_path / "perfdata") == read_perfdata_of(second)


def read_perfdata_of(paths: list[Path]) -> dict[str, float]:
    """What read_perfdata reads from a folder holding only ``paths``."""
    folder = paths[0].parent.parent / "only"
    folder.mkdir()
    for p in paths:
        shutil.copy(p, folder / p.name)
    return read_perfdata(folder)
