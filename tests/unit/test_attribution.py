"""Limit attribution (hollowscale/measure/attribution.py): each recorded case from a real run is named
correctly, and the ranking rule, the knee rule and the two snapshot sources behave as documented.

The recorded cases are the components' own /metrics (filtered to what attribution reads) and the
machine's /proc/stat, read at the edges of a measured window of a real plan point or bench trial:
tests/fixtures/attribution/<case>/{start,end}/<component>.prom and window.json (README there says
which run each came from).  No process is started here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hollowscale.measure.attribution import (
    BACKLOG,
    LOOP,
    RESOURCE,
    Context,
    Limit,
    Snapshot,
    attribute,
    bound_first,
    host_text,
    keep_text,
    rank,
    read_window,
    snapshot_from_prometheus,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "attribution"


def load_case(name: str) -> tuple[Snapshot, Snapshot, Context]:
    reads = read_window(FIXTURES / name)
    assert reads is not None, name
    return reads


def limit(a: Any, key: str) -> Any:
    return next(x for x in a.limits if x.key == key)


# ------------------------------------------------------------------------------ recorded cases
def test_a_throttled_controller_manager_is_named() -> None:
    a = attribute(*load_case("throttled-controller-manager"))
    assert a.binding is not None and a.binding.key == "client:controller-manager", a.words()
    cm = a.binding
    assert cm.figures["qps"] == 20.0 and cm.figures["mean_wait_ms"] > 50.0  # over one token interval (1/20 s)
    assert cm.figures["job_queue"]["mean_wait_ms"] > 0
    assert not limit(a, "cpu:apiserver").binding and not limit(a, "cpu:controller-manager").binding


def test_a_saturated_scheduler_is_named_and_its_loop_and_queue_after_it() -> None:
    a = attribute(*load_case("saturated-scheduler"))
    assert a.binding is not None and a.binding.key == "cpu:scheduler", a.words()
    assert a.binding.figures["cpu_limit_cores"] == 0.015 and "0.0149 cores of its 0.015-core" in a.binding.words
    binding = [x.key for x in a.limits if x.binding]
    assert binding == ["cpu:scheduler", "loop:scheduler", "pending:scheduler"]
    assert limit(a, "pending:scheduler").figures["growth_per_s"] > 0  # pods piled up in its queues
    assert not limit(a, "cpu:apiserver").binding and not limit(a, "client:scheduler").binding


def test_a_saturated_apiserver_is_named_before_what_it_causes() -> None:
    a = attribute(*load_case("saturated-apiserver"))
    assert a.binding is not None and a.binding.key == "cpu:apiserver", a.words()
    assert a.binding.figures["cpu_limit_cores"] == 0.25 and a.binding.figures["cores"] >= 0.9 * 0.25
    # what a slow apiserver causes binds too, and comes after it: etcd's latency as the apiserver sees it,
    # the Job controller's workers waiting on their requests, its queue
    binding = [x.key for x in a.limits if x.binding]
    assert binding.index("cpu:apiserver") < binding.index("loop:job-controller") < binding.index("queue:controller-manager")
    assert not limit(a, "cpu:host").binding and not limit(a, "client:controller-manager").binding


@pytest.mark.parametrize("case", sorted(p.name for p in FIXTURES.iterdir() if p.is_dir()))
def test_every_recorded_case_has_a_window_and_the_machine(case: str) -> None:
    start, end, ctx = load_case(case)
    a = attribute(start, end, ctx)
    assert 10.0 < a.window_s < 120.0
    host = limit(a, "cpu:host")
    assert 0 < host.figures["busy_cores"] <= ctx.cores
    assert a.to_dict()["binding"] == (a.binding.key if a.binding else None)
    # the ranked list keeps the rule: binding ones first, by tier
    tiers = [x.tier for x in a.limits if x.binding]
    assert tiers == sorted(tiers, key=[RESOURCE, LOOP, BACKLOG].index)


# ------------------------------------------------------------------------------ the rule
def lim(key: str, tier: str, pressure: float | None) -> Limit:
    return Limit(key, key.split(":")[-1], tier, pressure, "t", {}, key)


def test_rank_puts_causes_before_what_they_cause_and_the_host_after_a_component() -> None:
    ranked = rank([lim("queue:controller-manager", BACKLOG, 9.0), lim("loop:job-controller", LOOP, 3.0),
                   lim("etcd", RESOURCE, 2.0), lim("cpu:host", RESOURCE, 1.4),
                   lim("client:controller-manager", RESOURCE, 1.2), lim("cpu:apiserver", RESOURCE, 0.8),
                   lim("apf", RESOURCE, None)])
    assert [x.key for x in ranked] == ["client:controller-manager", "cpu:host", "etcd", "loop:job-controller",
                                       "queue:controller-manager", "cpu:apiserver", "apf"]
    assert rank([lim("cpu:scheduler", RESOURCE, 1.1), lim("cpu:host", RESOURCE, 2.0)])[0].key == "cpu:scheduler"


def attr(binding: str | None, pressures: dict[str, float]) -> dict[str, Any]:
    return {"binding": binding, "limits": [{"key": k, "pressure": v, "figures": {"x": v}, "words": f"{k} {v}"}
                                           for k, v in sorted(pressures.items(), key=lambda kv: -kv[1])]}


def test_bound_first_walks_up_to_the_first_failing_rate() -> None:
    points = [
        {"rate": 2.0, "passed": True, "attribution": attr(None, {"client:controller-manager": 0.7, "cpu:host": 0.5})},
        {"rate": 2.75, "passed": False, "attribution": attr("client:controller-manager",
                                                            {"client:controller-manager": 3.0, "cpu:host": 0.6})},
        {"rate": 6.5, "passed": False, "attribution": attr("cpu:host", {"client:controller-manager": 0.2, "cpu:host": 1.3})},
    ]
    b = bound_first(points)
    assert b is not None and b["key"] == "client:controller-manager" and b["binding"] and b["at_rate"] == 2.75
    assert (b["knee"]["pressure"], b["failing"]["pressure"]) == (0.7, 3.0)
    assert b["next"] == [{"key": "cpu:host", "pressure": 0.6}]
    # nothing binds up to the first failing rate: the nearest there, marked as not binding
    points[1]["attribution"] = attr(None, {"client:controller-manager": 0.9, "cpu:host": 0.6})
    b = bound_first(points)
    assert b is not None and not b["binding"] and b["key"] == "client:controller-manager" and b["at_rate"] == 2.75
    assert bound_first([{"rate": 1.0, "passed": True, "attribution": None}]) is None


def test_snapshot_files_keep_only_what_attribution_reads() -> None:
    text = ("# HELP process_cpu_seconds_total x\n# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 12.5\n"
            'go_goroutines 300\nworkqueue_depth{name="job"} 4\nworkqueue_depthx 1\n')
    assert keep_text(text) == 'process_cpu_seconds_total 12.5\nworkqueue_depth{name="job"} 4\n'
    host = host_text("cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 1 2 3\n", 2)
    s = Snapshot.from_texts(1.0, {"host": host})
    assert s.metrics["host"]["host_cores"] == [({}, 2.0)]
    assert sorted(v for _, v in s.metrics["host"]["host_cpu_seconds_total"])[-1] == 8.0


def test_the_host_and_a_component_from_two_synthetic_reads() -> None:
    a = Snapshot.from_texts(0.0, {"apiserver": "process_cpu_seconds_total 10\n",
                                  "host": host_text("cpu  1000 0 0 1000 0 0 0 0\n", 2)})
    b = Snapshot.from_texts(10.0, {"apiserver": "process_cpu_seconds_total 19.5\n",
                                   "host": host_text("cpu  2900 0 0 1100 0 0 0 0\n", 2)})
    r = attribute(a, b, Context(cores=2))
    assert r.binding is not None and r.binding.key == "cpu:apiserver"
    assert limit(r, "cpu:apiserver").figures["cores"] == 0.95
    assert limit(r, "cpu:host").figures == {"busy_cores": 1.9, "cores": 2, "control_plane_cores": 0.95,
                                            "other_cores": 0.95}


def test_a_component_held_to_a_cpu_limit_is_saturated_at_that_limit_not_at_a_core(tmp_path: Path) -> None:
    a = Snapshot.from_texts(0.0, {"scheduler": "process_cpu_seconds_total 10\n"})
    b = Snapshot.from_texts(10.0, {"scheduler": "process_cpu_seconds_total 12.8\n"})  # 0.28 cores
    assert attribute(a, b, Context(cores=2)).binding is None
    held = attribute(a, b, Context(cores=2, cpu_limits={"scheduler": 0.3}))
    assert held.binding is not None and held.binding.key == "cpu:scheduler"
    assert held.binding.figures["cpu_limit_cores"] == 0.3 and "0.3-core CPU limit" in held.binding.words
    # the limit travels in window.json, as keep_reads writes it
    (tmp_path / "start").mkdir()
    (tmp_path / "end").mkdir()
    (tmp_path / "start" / "scheduler.prom").write_text("process_cpu_seconds_total 10\n")
    (tmp_path / "end" / "scheduler.prom").write_text("process_cpu_seconds_total 12.8\n")
    (tmp_path / "window.json").write_text('{"t_start": 0, "t_end": 10, "cores": 2, "client_qps": {}, '
                                          '"cpu_limits": {"scheduler": 0.3}}')
    reads = read_window(tmp_path)
    assert reads is not None and reads[2].cpu_limits == {"scheduler": 0.3}
    assert attribute(*reads).binding.key == "cpu:scheduler"  # type: ignore[union-attr]


def test_a_snapshot_from_prometheus_is_the_same_samples_by_job() -> None:
    asked: list[str] = []

    def instant(q: str, at: float, purpose: str) -> list[dict[str, Any]]:
        asked.append(q)
        return [{"metric": {"__name__": "process_cpu_seconds_total", "job": "scheduler", "instance": "x"},
                 "value": [at, "4.5"]},
                {"metric": {"__name__": "scheduler_pending_pods", "job": "scheduler", "queue": "active"},
                 "value": [at, "7"]}]

    s = snapshot_from_prometheus(instant, 5.0)
    assert s.metrics == {"scheduler": {"process_cpu_seconds_total": [({}, 4.5)],
                                       "scheduler_pending_pods": [({"queue": "active"}, 7.0)]}}
    assert 'job=~"apiserver|etcd|controller-manager|scheduler|kueue"' in asked[0] and "workqueue_depth" in asked[0]
