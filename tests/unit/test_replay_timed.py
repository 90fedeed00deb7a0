"""The time-faithful replay's parts that need no cluster (issue 28, item 5b): the schedule of creates and
deletes from a trace (compressed, windowed, ordered), the driver against an in-memory API server (its
calls, the watch's records, the end's drain), the figures from synthetic records (pending quantiles per
QoS class, unschedulable and allocation series, never bound, lag, checks) and the report's timed parts."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from hollowscale.replay.api import ReplayApi
from hollowscale.replay.figures import DELETED_PENDING, reason_class, timed_figures
from hollowscale.replay.modes import TimedPlan, plan_replay
from hollowscale.replay.pods import TRACE_POD_ANNOTATION
from hollowscale.replay.report import comparison, comparison_markdown, write_run_markdown
from hollowscale.replay.run import run_seeds
from hollowscale.replay.timed import CREATE, DELETE, TimedRecord, TimedReplay, gpu_milli_held, timed_schedule
from hollowscale.scenario.trace import load_trace_scenario
from hollowscale.trace import TracePod

ROOT = Path(__file__).resolve().parents[2]
EXCERPT = ROOT / "tests" / "fixtures" / "trace" / "excerpt"
MSG = "0/2 nodes are available: 2 Insufficient nvidia.com/gpu. preemption: not eligible"


def _pod(name: str, created: int | None, deleted: int | None, qos: str = "LS", gpus: int = 0,
         milli: int = 0) -> TracePod:
    return TracePod(name, 1000, 1024, gpus, milli, (), qos, "", created, deleted)


# ------------------------------------------------------------------------------------------------ schedule


def test_the_schedule_compresses_orders_and_windows_the_trace() -> None:
    pods = [_pod("late", 500, 900), _pod("first", 100, 300), _pod("zero", 200, 200), _pod("tie", 100, 150),
            _pod("long", 300, 5000)]
    s = timed_schedule(pods, 10)
    assert [p.pod.name for p in s.pods] == ["first", "tie", "zero", "long", "late"]  # by creation, file order on ties
    assert [p.index for p in s.pods] == [0, 1, 2, 3, 4]
    assert s.start_s == 100 and s.end_s is None and s.trace_pods == 5  # starts at the earliest creation
    assert [(p.create_s, p.delete_s) for p in s.pods] == [(0.0, 20.0), (0.0, 5.0), (10.0, 10.0), (20.0, 490.0),
                                                          (40.0, 80.0)]
    assert s.duration_s == 490.0 and not any(p.cut for p in s.pods)
    events = [(at, what, p.pod.name) for at, what, p in s.events()]
    assert events[:4] == [(0.0, CREATE, "first"), (0.0, CREATE, "tie"), (5.0, DELETE, "tie"), (10.0, CREATE, "zero")]
    assert events[4] == (10.0, DELETE, "zero")  # a pod that ends as it starts: created, then deleted
    assert events[5] == (20.0, DELETE, "first") and events[6] == (20.0, CREATE, "long")  # ending frees first
    for name in ("first", "tie", "zero", "long", "late"):  # every pod created once, deleted once, in that order
        mine = [what for _, what, n in events if n == name]
        assert mine == [CREATE, DELETE], name
    w = timed_schedule(pods, 100, start_s=150, end_s=400)
    assert [p.pod.name for p in w.pods] == ["zero", "long"]  # created in [150, 400)
    assert [(p.create_s, p.delete_s, p.cut) for p in w.pods] == [(0.5, 0.5, False), (1.5, 2.5, True)]
    assert w.summary() == {"pods": 2, "trace_pods": 5, "compress": 100.0, "window": {"start_s": 150.0, "end_s": 400.0},
                           "cut_at_window_end": 1, "duration_s": 2.5}
    assert [p.pod.name for p in timed_schedule(pods, 1, limit=2).pods] == ["first", "tie"]
    with pytest.raises(ValueError, match="compress"):
        timed_schedule(pods, 0)
    with pytest.raises(ValueError, match="lack a creation or deletion time"):
        timed_schedule([*pods, _pod("untimed", 10, None)], 1)


def test_a_pod_holds_its_shares_or_whole_gpus() -> None:
    share = _pod("s", 0, 1, gpus=1, milli=250)
    assert gpu_milli_held(share, "dra-shared") == 250
    assert gpu_milli_held(share, "dra-whole") == gpu_milli_held(share, "counted") == 1000
    assert gpu_milli_held(_pod("m", 0, 1, gpus=4, milli=1000), "dra-shared") == 4000


# ------------------------------------------------------------------------------------- the driver, faked


class _Resp:
    def __init__(self, status: int, doc: dict[str, Any] | None = None):
        self.status_code = status
        self.ok = status < 400
        self.content = orjson.dumps(doc or {})
        self.text = self.content.decode()

    def json(self) -> Any:
        return orjson.loads(self.content)

    def raise_for_status(self) -> None:
        assert self.ok, self.status_code


class _Stream(_Resp):
    def __init__(self, events: queue.Queue[dict[str, Any]]):
        super().__init__(200)
        self.events = events

    def __enter__(self) -> _Stream:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def iter_content(self, chunk_size: int | None = None) -> Iterator[bytes]:
        while True:
            try:
                yield orjson.dumps(self.events.get(timeout=0.02)) + b"\n"
            except queue.Empty:  # a bookmark now and then lets the watch see it should stop
                yield b'{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"1"}}}\n'


class FakeApi:
    """An API server in memory: pods and claims by name, one stream of pod events, and a scheduler that binds
    every pod at once except those whose trace pod is in ``refuse`` (marked Unschedulable, left pending)."""

    def __init__(self, refuse: set[str]):
        self.refuse = refuse
        self.lock = threading.Lock()
        self.pods: dict[str, dict[str, Any]] = {}
        self.claims: dict[str, dict[str, Any]] = {}
        self.calls: list[tuple[str, str, str]] = []
        self.events: queue.Queue[dict[str, Any]] = queue.Queue()
        self.uid = 0

    def post(self, url: str, data: bytes, **_: Any) -> _Resp:
        body = orjson.loads(data)
        name = body["metadata"]["name"]
        with self.lock:
            self.uid += 1
            body["metadata"]["uid"] = str(self.uid)
            if url.endswith("/resourceclaims"):
                self.calls.append(("POST", "claim", name))
                self.claims[name] = body
                return _Resp(201, body)
            self.calls.append(("POST", "pod", name))
            self.pods[name] = body
            self.events.put({"type": "ADDED", "object": body})
            trace_pod = body["metadata"]["annotations"][TRACE_POD_ANNOTATION]
            if trace_pod in self.refuse:
                body = {**body, "status": {"conditions": [{"type": "PodScheduled", "status": "False",
                                                           "reason": "Unschedulable", "message": MSG}]}}
            else:
                body = {**body, "spec": {**body["spec"], "nodeName": "n-1"}}
            self.pods[name] = body
            self.events.put({"type": "MODIFIED", "object": body})
        return _Resp(201, body)

    def delete(self, url: str, **_: Any) -> _Resp:
        kind = "claim" if "/resourceclaims/" in url else "pod"
        name = url.rsplit("/", 1)[1]
        with self.lock:
            self.calls.append(("DELETE", kind, name))
            gone = (self.claims if kind == "claim" else self.pods).pop(name, None)
            if gone is not None and kind == "pod":
                self.events.put({"type": "DELETED", "object": gone})
        return _Resp(200 if gone is not None else 404)

    def get(self, url: str, params: dict[str, Any] | None = None, stream: bool = False, **_: Any) -> _Resp:
        if stream:
            return _Stream(self.events)
        if url.endswith("/resourceclaims"):
            with self.lock:
                return _Resp(200, {"items": list(self.claims.values())})
        return _Resp(200, {"items": [], "metadata": {"resourceVersion": "1"}})


def test_the_driver_creates_and_deletes_on_time_and_records_what_the_watch_saw() -> None:
    pods = [_pod("bound", 0, 10), _pod("refused", 2, 20, qos="BE", gpus=1, milli=1000),
            _pod("zero", 5, 5), _pod("share", 3, 30, gpus=1, milli=250)]
    schedule = timed_schedule(pods, 100)  # 0.3 s in all
    api = FakeApi({"refused"})
    replay = TimedReplay(ReplayApi(api, "https://x", "ns", "run-1", "dra-shared"),  # type: ignore[arg-type]
                         schedule, workers=2, drain_s=5)
    t0 = time.monotonic()
    replay.run()
    took = time.monotonic() - t0
    assert replay.errors == [] and not replay.stopped
    assert 0.3 <= took < 5
    assert not api.pods and not api.claims  # nothing left of the run
    for r in replay.records:  # every pod created, then deleted; a claim before its pod, its pod before it goes
        calls = [(verb, kind) for verb, kind, name in api.calls if name == r.name]
        claimed = r.kind != "cpu"
        assert calls == ([("POST", "claim")] if claimed else []) + [("POST", "pod"), ("DELETE", "pod")] + \
            ([("DELETE", "claim")] if claimed else []), (r.name, calls)
        assert r.created_ms is not None and r.deleted_ms is not None and r.gone_ms is not None
        assert r.created_ms >= r.due_create_ms - 1 and r.deleted_ms >= r.due_delete_ms - 1  # never early
        assert r.create_lag_s is not None and r.delete_lag_s is not None
    by = {r.trace_name: r for r in replay.records}
    assert by["bound"].bound_ms is not None and by["bound"].node == "n-1"
    assert by["refused"].bound_ms is None and by["refused"].unschedulable_events == 1 and by["refused"].reason == MSG
    assert by["share"].gpu_milli == 250 and by["refused"].gpu_milli == 1000
    f = timed_figures(replay.records, 4000, {"claim_shares_milli": 0, "counted_gpu_milli": 0}, "dra-shared",
                      replay.started_ms, replay.ended_ms, schedule.summary())
    assert f["checks"]["every_pod_created_and_deleted"]["passed"], f["checks"]
    assert f["checks"]["allocation_equals_apiserver"]["passed"]
    assert f["pods"]["never_bound"] == 1 and f["pods"]["unschedulable_ever"] == 1
    assert f["never_bound"] == {"BE": {"one": {"pods": 1, "reasons": {"Insufficient nvidia.com/gpu": 1}}}}
    assert f["unschedulable"]["peak"] == 1


def test_a_stopped_driver_deletes_what_it_created() -> None:
    schedule = timed_schedule([_pod("a", 0, 1000), _pod("b", 1, 1000), _pod("c", 900, 1000)], 100)
    api = FakeApi(set())
    replay = TimedReplay(ReplayApi(api, "https://x", "ns", "run-1", "counted"), schedule,  # type: ignore[arg-type]
                         drain_s=5)
    t0 = time.monotonic()
    replay.run(stop=lambda: time.monotonic() - t0 > 0.3)
    assert replay.stopped and any("stopped at" in e for e in replay.errors)
    assert not api.pods  # a and b deleted at once, c never created
    assert [r.created_ms is not None for r in replay.records] == [True, True, False]
    f = timed_figures(replay.records, 1000, None, "counted", replay.started_ms, replay.ended_ms, schedule.summary(),
                      stopped=True)
    assert not f["checks"]["every_pod_created_and_deleted"]["passed"]
    assert f["never_bound"] == {"LS": {"cpu": {"pods": 1, "reasons": {"never created (stopped)": 1}}}}


# ------------------------------------------------------------------------------------------------ figures


def _rec(i: int, qos: str, kind: str, gpu: int, created: float, bound: float | None, deleted: float,
         unsched: float | None = None, events: int = 0, lag: float = 0.0) -> TimedRecord:
    return TimedRecord(i, f"r{i}", f"p{i}", kind, qos, gpu, created, deleted, created_ms=created, create_lag_s=lag,
                       bound_ms=bound, node="n" if bound is not None else "", unschedulable_ms=unsched,
                       unschedulable_events=events, reason=MSG if events else "", deleted_ms=deleted,
                       delete_lag_s=0.0, gone_ms=deleted + 1)


RECORDS = [
    _rec(0, "LS", "one", 1000, 0, 100, 5000),
    _rec(1, "LS", "share", 500, 1000, 1300, 8000, lag=0.05),
    _rec(2, "BE", "one", 1000, 2000, 4000, 9000, unsched=2100, events=2, lag=0.2),  # unschedulable, then bound
    _rec(3, "BE", "share", 1000, 3000, None, 6000, unsched=3050, events=1),  # unschedulable until deleted
    _rec(4, "BE", "cpu", 0, 3500, None, 3600),  # deleted before any verdict
]


def test_timed_figures_from_records() -> None:
    f = timed_figures(RECORDS, 4000, {"claim_shares_milli": 0, "counted_gpu_milli": 0}, "dra-shared", 0.0, 10_000.0,
                      {"duration_s": 9.0})
    assert f["protocol"] == "timed"
    assert f["pending_ms"] == {"BE": {"count": 1, "p50": 2000.0, "p90": 2000.0, "p99": 2000.0, "max": 2000.0},
                               "LS": {"count": 2, "p50": 100.0, "p90": 300.0, "p99": 300.0, "max": 300.0}}
    pods = f["pods"]
    assert (pods["total"], pods["bound"], pods["never_bound"], pods["unschedulable_ever"]) == (5, 3, 2, 2)
    assert pods["by_qos"] == {"BE": 3, "LS": 2}
    assert f["never_bound"] == {"BE": {"share": {"pods": 1, "reasons": {reason_class(MSG): 1}},
                                       "cpu": {"pods": 1, "reasons": {DELETED_PENDING: 1}}}}
    # unschedulable: p2 over [2100, 4000), p3 over [3050, 6000): two at once from 3050, exactly
    assert f["unschedulable"] == {"peak": 2, "peak_at_s": 3.05, "mean": round((1900 + 2950) / 10_000, 3)}
    s = f["series"]
    assert len(s["t_s"]) == 101 and s["t_s"][31] == 3.1 and s["t_s"][-1] == 10.0
    assert [s["unschedulable"][i] for i in (20, 21, 31, 40, 50, 60)] == [0, 1, 2, 1, 1, 0]
    assert [s["pending"][i] for i in (0, 5, 31, 35, 40)] == [1, 0, 2, 3, 1]  # p4 pending over [3500, 3600)
    assert [s["running"][i] for i in (0, 1, 20, 45, 85, 95)] == [0, 1, 2, 3, 1, 0]
    # GPUs held: p0 1000 over [100, 5000), p1 500 over [1300, 8000), p2 1000 over [4000, 9000)
    assert s["gpu_allocated_pct"][45] == 62.5 and s["gpu_allocated_pct"][85] == 25.0
    assert f["gpu_allocation"] == {"peak_milli": 2500, "max_pct": 62.5,
                                   "mean_pct": round(100 * (1000 * 4900 + 500 * 6700 + 1000 * 5000) / 10_000 / 4000, 3)}
    t = f["timing"]
    assert t["late_creates"] == 1 and t["create_lag_ms"]["max"] == 200.0 and t["replay_s"] == 10.0
    assert f["checks"]["every_pod_created_and_deleted"]["passed"]
    assert f["checks"]["allocation_equals_apiserver"] == {"replay_gpu_milli": 0, "apiserver_gpu_milli": 0,
                                                          "passed": True, "apiserver": {"claim_shares_milli": 0,
                                                                                        "counted_gpu_milli": 0}}
    held = timed_figures(RECORDS, 4000, {"claim_shares_milli": 500, "counted_gpu_milli": 0}, "dra-shared", 0.0,
                         10_000.0, {})
    assert not held["checks"]["allocation_equals_apiserver"]["passed"]


def test_the_series_agrees_with_the_records_at_every_point() -> None:
    f = timed_figures(RECORDS, 4000, None, "counted", 0.0, 10_000.0, {})
    for t_s, n in zip(f["series"]["t_s"], f["series"]["unschedulable"], strict=True):
        t = t_s * 1000
        assert n == sum(1 for r in RECORDS if r.unschedulable_ms is not None and r.unschedulable_ms <= t
                        < (r.pending_end_ms or float("inf")))
    assert max(f["series"]["unschedulable"]) <= f["unschedulable"]["peak"]


# ------------------------------------------------------------------------------------- scenario and report


def _timed_scenario(tmp_path: Path, **trace: Any) -> Path:
    import yaml

    doc = {"name": "t", "workload": {"trace": {"pods": str(EXCERPT / "pods.csv"), "nodes": str(EXCERPT / "nodes.csv"),
                                               "mode": "timed", "compress": 1000, **trace}},
           "variants": [{"name": "default"}, {"name": "packing", "scheduler": {"profile": "packing"}}]}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_a_timed_scenario_plans_its_schedule_and_runs_once_per_variant(tmp_path: Path) -> None:
    ts = load_trace_scenario(_timed_scenario(tmp_path, window={"start_s": 10_000_000, "end_s": 11_000_000}))
    plan = plan_replay(ts, 0)
    assert isinstance(plan, TimedPlan) and plan.key == "schedule"
    inside = [p for p in ts.trace.pods if 10_000_000 <= (p.creation_s or 0) < 11_000_000]
    assert plan.summary["pods"] == len(inside) > 0 and plan.summary["compress"] == 1000.0
    assert run_seeds(ts, [1, 2]) == [0]
    paper = load_trace_scenario(_timed_scenario(tmp_path, mode="paper", compress=None))
    assert plan_replay(paper, 42).key == "sequence" and run_seeds(paper) == [42]


def _timed_summary(variant: str, p99: float, peak: int) -> dict[str, Any]:
    f = timed_figures(RECORDS, 4000, {"claim_shares_milli": 0, "counted_gpu_milli": 0}, "dra-shared", 0.0, 10_000.0,
                      {"compress": 1000.0, "window": {"start_s": 0.0, "end_s": None}, "duration_s": 9.0})
    f["pending_ms"]["LS"]["p99"] = p99
    f["unschedulable"]["peak"] = peak
    return {"scenario": "t", "variant": variant, "seed": 0, "mode": "timed", "complete": True, "passed": True,
            "gpu_mode": "dra-shared", "duration_s": 30.0, "replay": f, "timings": {"replay": 10.0},
            "resources": {"cpu_cores": {"agent": 0.1}}, "errors": [], "modelled": ["a sentence"]}


def test_the_report_of_timed_runs(tmp_path: Path) -> None:
    ts = load_trace_scenario(_timed_scenario(tmp_path))
    results = [("default", 0, _timed_summary("default", 300.0, 2)), ("packing", 0, _timed_summary("packing", 250.0, 1))]
    write_run_markdown(tmp_path / "summary.md", results[0][2])
    text = (tmp_path / "summary.md").read_text()
    assert "# t: variant default, timed" in text
    assert "| LS | 2 | 2 | 100.0 | 300.0 | 300.0 | 300.0 |" in text
    assert "| BE | GPU share | 1 | 1 x Insufficient nvidia.com/gpu |" in text
    assert "creation lag: 1 of 5 creates started more than 100 ms late" in text
    assert "compress 1,000 (trace seconds per replay second)" in text and "- every_pod_created_and_deleted: passed" in text
    c = comparison(ts, results)
    assert c["trace"]["mode"] == "timed" and c["trace"]["compress"] == 1000.0
    v = c["variants"]["packing"]
    assert v["pending_ms_p99"]["LS"] == {"mean": 250.0, "min": 250.0, "max": 250.0}
    assert v["unschedulable_peak"]["max"] == 1 and v["gpu_allocation_max_pct"]["max"] == 62.5
    md = comparison_markdown(c)
    assert "| variant | pending p99 BE (ms) | pending p99 LS (ms) |" in md
    assert "| default | 2,000.0 | 300.0 | 3 | 2 | 2 |" in md
    from hollowscale.replay.report import modelled, write_comparison

    sentences = modelled("dra-shared", ts.file.variants[0], ts)
    assert any(s.startswith("Protocol: time-faithful: the whole trace") and "divided by 1,000" in s
               and "no tuning" in s for s in sentences)
    assert not any(s.startswith("Fragmentation") for s in sentences)
    write_comparison(tmp_path, ts, results)
    assert (tmp_path / "comparison.png").stat().st_size > 0 and not (tmp_path / "comparison-plot-error.txt").exists()
