"""bench_hollow's pure helpers: medians and spread, apiserver request counts, py-spy summaries."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench" / "bench_hollow.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_hollow_under_test", BENCH)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


bh = _load()


# --- medians and spread -------------------------------------------------------------------------
def test_spread_is_median_min_max_of_numbers_and_keeps_raw_values() -> None:
    s = bh.spread([3.0, None, 1.0, 2.0, float("nan")])
    assert s["median"] == 2.0 and s["min"] == 1.0 and s["max"] == 3.0 and s["n"] == 3
    assert s["values"][1] is None and len(s["values"]) == 5
    assert bh.spread([1, 2])["median"] == 1.5
    assert bh.spread([None, None]) == {"median": None, "min": None, "max": None, "n": 0, "values": [None, None]}


def test_summarise_runs_per_engine_over_dotted_paths() -> None:
    runs = [{"engine": "hollow", "repeat": 1, "steady": {"engine_cores": 0.2}},
            {"engine": "kwok", "repeat": 1, "steady": {"engine_cores": 0.5}},
            {"engine": "kwok", "repeat": 2, "steady": {"engine_cores": 0.7}},
            {"engine": "hollow", "repeat": 2, "steady": {"engine_cores": 0.4}},
            {"engine": "hollow", "repeat": 3, "steady": {}}]
    s = bh.summarise_runs(runs, ["steady.engine_cores"])
    assert list(s) == ["hollow", "kwok"]
    assert s["hollow"]["steady.engine_cores"]["values"] == [0.2, 0.4, None]
    assert s["hollow"]["steady.engine_cores"]["median"] == pytest.approx(0.3)
    assert s["kwok"]["steady.engine_cores"]["median"] == pytest.approx(0.6)


def test_format_median_and_range() -> None:
    assert bh.fmt_spread(bh.spread([1.5, 2.5, 4.5])) == "2.50 (1.50-4.50)"
    assert bh.fmt_spread(bh.spread([1.0, 2.0, 4.0])) == "2 (1-4)"
    assert bh.fmt_spread(bh.spread([0, 0])) == "0"
    assert bh.fmt_spread(bh.spread([12.34, None])) == "12.3, 1 of 2 runs"
    assert bh.fmt_spread(bh.spread([None])) == "n/a"
    assert bh.fmt_num(1234.4) == "1234"
    assert bh.fmt_num(0.12345) == "0.123"


def test_ratios_come_from_medians_and_order_alternates() -> None:
    runs = [{"engine": e, "repeat": r, "steady": {"engine_cores": v}}
            for e, r, v in [("hollow", 1, 0.1), ("hollow", 2, 0.3), ("hollow", 3, 0.2),
                            ("kwok", 1, 1.0), ("kwok", 2, 0.4), ("kwok", 3, 0.5)]]
    rat = bh.ratios(bh.summarise_runs(runs, [p for p, _ in bh.figures()]))
    assert rat["steady.engine_cores"] == pytest.approx(0.2 / 0.5)
    assert bh.run_order(["hollow", "kwok"], 1) == ["hollow", "kwok"]
    assert bh.run_order(["hollow", "kwok"], 2) == ["kwok", "hollow"]
    assert bh.run_order(["hollow"], 2) == ["hollow"]
    assert bh.ratios(bh.summarise_runs(runs[:3], ["steady.engine_cores"])) == {}


def test_targets_without_kwok_are_not_judged_against_it() -> None:
    runs = [{"engine": "hollow", "repeat": 1, "steady": {"engine_cores": 0.2, "nodes_went_notready": 0,
                                                          "lease_age_s": {"p99": 11.0}},
             "register": {"all_ready_s": 14.0}}]
    rows = bh.targets(bh.summarise_runs(runs, [p for p, _ in bh.figures()]), 100)
    by = {r["target"]: r for r in rows}
    assert by["steady 100 nodes: agent CPU"]["met"] is True
    assert by["100 nodes Ready"]["met"] is True
    assert by["pods to Running per second (bare)"]["met"] is None


# --- apiserver request counts -------------------------------------------------------------------
METRICS_A = """\
# HELP apiserver_request_total [STABLE] Counter of apiserver requests
# TYPE apiserver_request_total counter
apiserver_request_total{code="200",component="apiserver",dry_run="",group="coordination.k8s.io",resource="leases",scope="resource",subresource="",verb="PUT",version="v1"} 100
apiserver_request_total{code="409",component="apiserver",dry_run="",group="coordination.k8s.io",resource="leases",scope="resource",subresource="",verb="PUT",version="v1"} 5
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="status",verb="PATCH",version="v1"} 40
apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="binding",verb="POST",version="v1"} 10
apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="pods",scope="namespace",subresource="",verb="POST",version="v1"} 10
apiserver_request_total{code="200",component="",dry_run="",group="",resource="",scope="",subresource="/metrics",verb="GET",version=""} 2
# HELP apiserver_request_duration_seconds x
# TYPE apiserver_request_duration_seconds histogram
apiserver_request_duration_seconds_bucket{le="0.1",resource="pods",verb="POST"} 3
"""


def test_request_counts_failed_by_code() -> None:
    f = bh.request_counts(METRICS_A, failed=True)
    assert f == {"PUT leases 409": 5}


def test_request_counts_group_by_verb_resource_subresource() -> None:
    c = bh.request_counts(METRICS_A)
    assert c["PUT leases"] == 105  # codes summed
    assert c["PATCH pods/status"] == 40
    assert c["POST pods/binding"] == 10
    assert c["POST pods"] == 10
    assert c["GET /metrics"] == 2
    assert not any("duration" in k for k in c)


def test_counts_delta_keeps_increases_only() -> None:
    a = {"PUT leases": 100.0, "GET nodes": 5.0}
    b = {"PUT leases": 160.0, "GET nodes": 5.0, "POST pods": 3.0}
    assert bh.counts_delta(a, b) == {"POST pods": 3.0, "PUT leases": 60.0}


def test_pod_api_figures_subtract_the_bench_client() -> None:
    delta = {"POST pods": 100.0, "DELETE pods": 100.0, "POST pods/binding": 100.0, "PATCH pods/status": 200.0,
             "PUT pods/status": 10.0, "LIST pods": 4.0, "POST events": 50.0}
    f = bh.pod_api_figures(delta, {"create_pod": 100.0, "delete_pod": 100.0, "watch": 1.0}, 100.0)["per_pod"]
    assert f["status_writes"] == pytest.approx(2.1)
    assert f["bindings"] == pytest.approx(1.0)
    assert f["deletes"] == pytest.approx(1.0)
    assert f["events"] == pytest.approx(0.5)
    assert f["mutating_incl_bench"] == pytest.approx(5.6)
    assert f["mutating_excl_bench"] == pytest.approx(3.6)
    beats = bh.pod_api_figures({**delta, "PATCH leases": 300.0, "PUT nodes/status": 100.0, "POST leases": 100.0},
                               {"create_pod": 100.0, "delete_pod": 100.0}, 100.0)["per_pod"]
    assert beats["heartbeat_writes"] == pytest.approx(5.0)
    assert beats["mutating_excl_bench"] == pytest.approx(3.6)  # heartbeats are not the pods' writes
    assert beats["mutating_excl_bench_incl_heartbeats"] == pytest.approx(8.6)
    assert bh.pod_api_figures(delta, {}, 0)["per_pod"]["status_writes"] is None


def test_steady_api_figures_per_node_per_minute() -> None:
    delta = {"PUT leases": 6000.0, "PATCH nodes/status": 100.0, "LIST leases": 10.0}
    f = bh.steady_api_figures(delta, 100, 120.0)  # 100 nodes x 2 minutes
    assert f["per_node_per_min"]["lease_writes"] == pytest.approx(30.0)
    assert f["per_node_per_min"]["node_status_writes"] == pytest.approx(0.5)
    assert f["per_node_per_min"]["mutating"] == pytest.approx(30.5)
    assert f["per_node_per_min"]["reads"] == pytest.approx(0.05)
    assert f["by_group_per_node_per_min"]["LIST leases"] == pytest.approx(0.05)


def test_register_api_figures_subtract_bench_node_creates() -> None:
    delta = {"POST nodes": 10.0, "PATCH nodes/status": 20.0, "POST leases": 10.0}
    f = bh.register_api_figures(delta, {"create_node": 10.0}, 10)["per_node"]
    assert f["mutating_excl_bench"] == pytest.approx(3.0)
    assert f["node_creates"] == pytest.approx(1.0)
    assert f["lease_writes"] == pytest.approx(1.0)


def test_bench_requests_counts_answered_requests_by_verb() -> None:
    m = bh.Metrics()
    m.api_requests.labels("create_pod", "201").inc(3)
    m.api_requests.labels("create_pod", "409").inc(1)
    m.api_requests.labels("create_pod", "0").inc(7)
    m.api_requests.labels("delete_pod", "200").inc(2)
    assert bh.bench_requests(m) == {"create_pod": 4.0, "delete_pod": 2.0}


# --- py-spy -------------------------------------------------------------------------------------
RAW = """\
<module> (hollow/__main__.py:5);run (asyncio/runners.py:190);_run_once (asyncio/base_events.py:1922);renew (hollow/leases.py:80);dumps (/x/.venv/lib/python3.11/site-packages/orjson/__init__.py:1) 30
<module> (hollow/__main__.py:5);run (asyncio/runners.py:190);_run_once (asyncio/base_events.py:1922);renew (hollow/leases.py:80) 10
<module> (hollow/__main__.py:5);run (asyncio/runners.py:190);_run_once (asyncio/base_events.py:1922);<lambda> (hollow/pods.py:12);renew (hollow/leases.py:80) 40
<module> (hollow/__main__.py:5);run (asyncio/runners.py:190);select (selectors.py:468) 20
not a stack line
"""


def test_frame_names_are_module_function() -> None:
    assert bh.frame_name("renew (hollow/leases.py:80)") == "hollow.leases:renew"
    assert bh.frame_name("dumps (/x/.venv/lib/python3.11/site-packages/orjson/__init__.py:1)") == "orjson:dumps"
    assert bh.frame_name("get (/usr/local/lib/python3.11/asyncio/queues.py:158)") == "asyncio.queues:get"
    assert bh.frame_name(f"f ({bh.ROOT}/hollow/agent.py:3)") == "hollow.agent:f"
    assert bh.frame_name("<lambda> (hollow/pods.py)") == "hollow.pods:<lambda>"


def test_profile_summary_self_and_inclusive_percentages() -> None:
    stacks = bh.parse_raw_profile(RAW)
    assert sum(stacks.values()) == 100
    s = bh.summarise_profile(stacks, top=3)
    assert s["samples"] == 100
    own = {r["function"]: r["pct"] for r in s["self"]}
    assert own["hollow.leases:renew"] == 50.0  # leaf in the 10- and 40-sample stacks
    assert own["orjson:dumps"] == 30.0
    assert own["selectors:select"] == 20.0
    full = bh.summarise_profile(stacks, top=20)
    incl = {r["function"]: r["pct"] for r in full["inclusive"]}
    assert full["trunk"] == ["hollow.__main__:<module>", "asyncio.runners:run"]  # down to where it branches
    assert "hollow.__main__:<module>" not in incl
    assert incl["hollow.leases:renew"] == 80.0  # counted once per stack
    assert incl["asyncio.base_events:_run_once"] == 80.0
    assert len(s["inclusive"]) == 3


def test_trunk_stops_where_samples_branch_and_ignores_loop_rooted_stacks() -> None:
    stacks = bh.parse_raw_profile(
        "main (m.py:1);loop (m.py:2) 30\n"                      # the loop's own time: ends on the chain
        "main (m.py:1);loop (m.py:2);work (w.py:1) 50\n"
        "main (m.py:1);loop (m.py:2);other (w.py:2) 5\n"
        "resumed (c.py:1);inner (c.py:2) 15\n")                # a coroutine resumed from C: a root of its own
    assert bh.trunk_of(stacks) == ["m:main", "m:loop"]
    assert bh.trunk_of(bh.parse_raw_profile("")) == []


def test_merge_profiles_sums_repeats_per_phase(tmp_path: Path) -> None:
    f1, f2 = tmp_path / "a.txt", tmp_path / "b.txt"
    f1.write_text("a (m.py:1);b (m.py:2) 3\n")
    f2.write_text("a (m.py:1) 1\n")
    runs = [{"engine": "hollow", "profiles": {"steady": str(f1)}}, {"engine": "hollow", "profiles": {"steady": str(f2)}},
            {"engine": "kwok"}]
    merged = bh.merge_profiles(runs)
    assert list(merged) == ["steady"]
    assert merged["steady"]["runs"] == 2 and merged["steady"]["samples"] == 4
    assert merged["steady"]["self"][0] == {"function": "m:b", "samples": 3, "pct": 75.0}


# --- KWOK configuration -------------------------------------------------------------------------
def test_kwok_configuration_has_the_issue_settings() -> None:
    doc = bh.kwok_configuration()
    assert doc["apiVersion"] == "config.kwok.x-k8s.io/v1alpha1" and doc["kind"] == "KwokConfiguration"
    o = doc["options"]
    assert (o["nodeLeaseParallelism"], o["nodePlayStageParallelism"], o["podPlayStageParallelism"],
            o["podsOnNodeSyncParallelism"]) == (32, 32, 64, 16)


def test_check_kwok_fields_flags_unknown_options(tmp_path: Path) -> None:
    types = tmp_path / bh.KWOK_TYPES
    types.parent.mkdir(parents=True)
    types.write_text("\n".join(f'X uint `json:"{k},omitempty"`' for k in bh.KWOK_OPTIONS if k != "cidr"))
    assert bh.check_kwok_fields(tmp_path) == ["cidr"]


# --- the report ---------------------------------------------------------------------------------
def _run(engine: str, repeat: int, order: int, cores: float) -> dict:
    return {"engine": engine, "repeat": repeat, "order": order,
            "register": {"all_ready_s": 10.0, "ready": 100, "engine_cpu_s": 1.0},
            "steady": {"engine_cores": cores, "lease_age_s": {"p50": 5.0, "p99": 10.0}, "nodes_went_notready": 0,
                       "api": {"delta": {"PUT leases": 600.0}, "failed": {}}},
            "pods_bare": {"running_pods_per_s": 50.0, "engine_cpu_s_per_1000_pods": 3.0 / cores, "complete": True,
                          "api": {"delta": {"DELETE pods": 200.0}, "failed": {"DELETE pods 404": 100.0},
                                  "per_pod": {"mutating_excl_bench": 3.0}}}}


def test_report_renders_medians_ratios_targets_and_failed_codes(tmp_path: Path) -> None:
    runs = [_run("hollow", 1, 1, 0.1), _run("kwok", 1, 2, 0.3), _run("kwok", 2, 1, 0.5), _run("hollow", 2, 2, 0.3)]
    doc = {"date": "d", "command": "c", "control_plane_profile": "scale", "runs": runs, "manual_notes": ["hand"],
           "machine": {"cpu_model": "x", "logical_cpus": 2, "memory_gb": 1, "os": "linux", "python": "3.11"},
           "versions": {"kubernetes": "k", "etcd": "e", "kwok": "w"},
           "params": {"nodes": 100, "steady_s": 20, "pods": 100, "repeats": 2, "fresh_control_plane_per_run": True}}
    bh.finish_doc(doc)
    assert doc["summary"]["hollow"]["steady.engine_cores"]["median"] == pytest.approx(0.2)
    assert doc["ratios"]["steady.engine_cores"] == pytest.approx(0.5)
    assert doc["notes"][-1] == "hand"
    md = tmp_path / "r.md"
    bh.write_md(doc, md)
    text = md.read_text()
    assert "| (b) engine CPU (cores) | 0.200 (0.100-0.300) | 0.400 (0.300-0.500) | 0.500 |" in text
    assert "r1: hollow then kwok; r2: kwok then hollow" in text
    assert "of which code 404 | 100 | 100 |" in text


def test_schema_1_files_are_upgraded_for_render() -> None:
    old = {"profile": "scale", "params": {"nodes": 10}, "notes": ["old note"],
           "engines": {"hollow": {"steady": {"engine_cores": 0.1}}, "kwok": {"steady": {"engine_cores": 0.2}}}}
    new = bh.upgrade_doc(old)
    assert [(r["engine"], r["repeat"], r["order"]) for r in new["runs"]] == [("hollow", 1, 1), ("kwok", 1, 2)]
    assert new["control_plane_profile"] == "scale" and new["manual_notes"] == ["old note"]
    assert new["params"]["fresh_control_plane_per_run"] is False


def test_pprof_cum_shares_takes_each_rows_inclusive_percent() -> None:
    text = """File: kube-apiserver
Showing nodes accounting for 17.33s, 43.34% of 39.99s total
      flat  flat%   sum%        cum   cum%
     0.04s   0.1%  0.13%     15.44s 38.61%  k8s.io/apiserver/pkg/registry/generic/registry.(*Store).Update
     0.02s  0.05%  1.43%      5.35s 13.38%  k8s.io/apiserver/pkg/authentication/request/x509.(*Authenticator).AuthenticateRequest
     0.03s 0.075%  0.53%      6.71s 16.78%  k8s.io/apimachinery/pkg/util/managedfields/internal.(*FieldManager).Update
     0.01s 0.025%  0.53%      6.66s 16.65%  k8s.io/apimachinery/pkg/util/managedfields/internal.(*FieldManager).UpdateNoErrors
         0     0%  2.48%      3.77s  9.43%  runtime.gcBgMarkWorker
         0     0%  2.48%      3.76s  9.40%  runtime.gcBgMarkWorker.func2
"""
    shares = bh.pprof_cum_shares(text)
    assert shares["update_path"] == 38.6 and shares["x509_auth"] == 13.4
    assert shares["managed_fields"] == 16.8  # UpdateNoErrors is another function
    assert shares["gc"] == 9.4 and shares["decode"] == 0.0
    assert set(shares) == {key for key, _, _ in bh.APISERVER_PROFILE_ROWS}
