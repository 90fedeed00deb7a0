"""The `sweep:` section: validation with file, field and expectation; grid cells and point scenarios."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from hollowscale.plan.grid import cells, point_doc, point_scenario
from hollowscale.scenario import ScenarioError, load_scenario, parse_scenario
from kubecore.yamlfile import load_yaml

REPO = Path(__file__).resolve().parents[2]
SMALL = REPO / "scenarios" / "plan-small.yaml"


def doc() -> dict[str, Any]:
    return copy.deepcopy(load_yaml(SMALL))


def problems(d: dict[str, Any]) -> str:
    with pytest.raises(ScenarioError) as err:
        parse_scenario(d, "x.yaml", REPO)
    return str(err.value)


def test_plan_small_is_a_valid_scenario_with_a_sweep() -> None:
    sc = load_scenario(SMALL)
    assert sc.sweep is not None and len(sc.sweep.sizes) == 2
    assert sc.to_dict()["sweep"]["rate"]["resolution"] == sc.sweep.rate.resolution
    assert "sweep" not in load_scenario(REPO / "scenarios" / "smoke.yaml").to_dict()


def test_bad_sweep_fields_are_named() -> None:
    d = doc()
    d["sweep"]["rate"] = {"lo": 5, "hi": 2, "resolution": 1}
    d["sweep"]["sizes"] = [{"gpu": 0}]
    msg = problems(d)
    assert "x.yaml" in msg
    assert "sweep.rate.hi" in msg and "expected hi > lo (5), got 2" in msg
    assert "sweep.sizes[0]" in msg and "node count >= 1 for pool 'gpu', got 0" in msg


def test_sweep_names_must_exist_in_the_scenario() -> None:
    d = doc()
    d["sweep"]["sizes"] = [{"gpux": 10}]
    d["sweep"]["slos"] = ["nope"]
    d["sweep"]["profiles"] = ["fast"]
    d["sweep"]["mixes"] = [{"name": "m", "shares": {"serve": 1}}]
    msg = problems(d)
    assert "sweep.sizes[0].gpux" in msg and "expected a pool of the scenario (gpu)" in msg
    assert "sweep.mixes[0].shares.serve" in msg
    assert "sweep.slos[0]" in msg and "'nope'" in msg
    assert "sweep.profiles[0]" in msg and "expected one of default, scale" in msg


def test_resolution_must_leave_something_to_search() -> None:
    d = doc()
    d["sweep"]["rate"] = {"lo": 1, "hi": 2, "resolution": 1}
    assert "sweep.rate.resolution" in problems(d)


def test_unknown_sweep_key_is_refused() -> None:
    d = doc()
    d["sweep"]["rates"] = [1, 2]
    assert "sweep.rates" in problems(d)


def test_cells_are_profiles_by_mixes_by_sizes() -> None:
    d = doc()
    d["workloads"].append(copy.deepcopy(d["workloads"][0]) | {"name": "infer"})
    d["sweep"]["mixes"] = [{"name": "train-only", "shares": {"train": 1}}, {"name": "half", "shares": {"train": 1, "infer": 1}}]
    d["sweep"]["profiles"] = ["default", "scale"]
    sc = parse_scenario(d, "x.yaml", REPO)
    assert sc.sweep is not None
    cs = cells(d, sc.sweep)
    assert [c.key for c in cs][:3] == ["default/train-only/gpu=100", "default/train-only/gpu=300", "default/half/gpu=100"]
    assert len(cs) == 8 and cs[-1].key == "scale/half/gpu=300" and cs[1].nodes == 300


def test_point_scenario_runs_the_cell_at_a_constant_rate_without_its_own_slos() -> None:
    d = doc()
    sc = parse_scenario(d, str(SMALL), REPO)
    assert sc.sweep is not None
    cell = cells(d, sc.sweep)[1]
    p = point_scenario(d, str(SMALL), sc.sweep, cell, 4.5, 7, str(REPO))
    assert p.nodes_total == 300 and p.arrival.curve == "constant" and p.arrival.rate == 4.5
    assert p.arrival.duration_s == sc.sweep.warmup_s + sc.sweep.measure_s
    assert p.slos == () and p.sweep is None and not p.measurements.prometheus
    assert p.cluster.dir == "/tmp/hs-plan-small-default" and p.cluster.namespace.endswith("-p007")
    assert d == doc()  # the plan's document is left as it was
    raw = point_doc(d, sc.sweep, cell, 1.0, 1)
    assert raw["measurements"]["settle_timeout_s"] == sc.sweep.settle_s


def test_client_limits_are_a_sweep_axis_with_a_cluster_each() -> None:
    d = doc()
    d["sweep"]["profiles"] = ["default"]
    d["sweep"]["limits"] = [{"name": "upstream"}, {"name": "cm-qps-60", "controller_manager": {"qps": 60, "burst": 90}}]
    sc = parse_scenario(d, "x.yaml", REPO)
    assert sc.sweep is not None
    cs = cells(d, sc.sweep)
    assert [c.key for c in cs] == ["default/as-written/gpu=100", "default/as-written/gpu=300",
                                   "default+cm-qps-60/as-written/gpu=100", "default+cm-qps-60/as-written/gpu=300"]
    assert cs[2].profile == "default" and cs[2].limits_dict() == {"controller-manager": (60.0, 90)}
    assert cs[0].limits_dict() == {}
    from hollowscale.plan.grid import cluster_dir
    assert cluster_dir(sc.sweep, cs[2].setting) == "/tmp/hs-plan-small-default-cm-qps-60"
    p = point_doc(d, sc.sweep, cs[2], 2.0, 7)
    assert p["cluster"]["profile"] == "default" and p["cluster"]["dir"] == "/tmp/hs-plan-small-default-cm-qps-60"


def test_bad_client_limits_are_named() -> None:
    d = doc()
    d["sweep"]["limits"] = [{"name": "a", "controller_manager": {"qps": 0, "burst": 1.5}}, {"name": "a"},
                            {"name": "b", "apiserver": {"qps": 1, "burst": 1}}]
    msg = problems(d)
    assert "sweep.limits[0].controller_manager.qps" in msg and "expected a number > 0, got 0" in msg
    assert "sweep.limits[0].controller_manager.burst" in msg and "expected an integer" in msg
    assert "sweep.limits[2].apiserver" in msg
    d["sweep"]["limits"] = [{"name": "a"}, {"name": "a"}]
    assert "sweep.limits[1].name" in problems(d) and "duplicate limits name 'a'" in problems(d)


def test_a_profile_with_client_limits_keeps_its_name_and_other_limits() -> None:
    from hollowscale.cluster.profiles import get_profile, with_client_limits
    base = get_profile("default")
    p = with_client_limits(base, {"controller-manager": (60.0, 90)})
    assert (p.name, p.controller_manager_qps, p.controller_manager_burst) == ("default", 60.0, 90)
    assert (p.scheduler_qps, p.apiserver_flags) == (base.scheduler_qps, base.apiserver_flags)
    assert p.client_qps()["kube-controller-manager"] == (60.0, 90)
    assert with_client_limits(base, None) is base
    with pytest.raises(ValueError, match="no client limit for 'etcd'"):
        with_client_limits(base, {"etcd": (1.0, 1)})
