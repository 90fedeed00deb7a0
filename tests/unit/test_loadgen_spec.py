"""loadgen.spec: the typed load spec, its validation messages, the curve maths, to_doc <-> load_spec."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from kubecore.distributions import DurationDist
from kubecore.schema import SpecError
from loadgen.spec import (
    ArrivalSpec,
    LoadSpec,
    RoleSpec,
    TolerationSpec,
    WorkloadSpec,
    is_scenario,
    load_spec,
    parse_load_spec,
)

ROOT = Path(__file__).resolve().parents[2]
#: the shipped scenarios with a load (a trace scenario replays a trace instead: tests/unit/test_trace_scenario.py)
SHIPPED = sorted(p for p in (ROOT / "scenarios").glob("*.yaml") if "workload" not in yaml.safe_load(p.read_text()))
BAD = ROOT / "tests" / "fixtures" / "scenarios" / "bad"
#: bad scenario fixtures about workloads/arrival: load_spec must reject them as the fixture says
LOAD_FIXTURES = (
    "bad-curve", "bad-dist", "bad-duration", "bad-exit-code", "bad-kind", "bad-namespace", "bad-quantity", "bad-share", "duplicate-workload",
    "forever-job", "fractional-gpu", "missing-arrival", "missing-workloads", "negative-rate", "no-roles",
    "not-yaml", "pod-replicas", "reserved-namespace", "duplicate-key", "yaml-alias", "yaml11-boolean", "ramp-missing-end", "rate-on-ramp", "steps-too-long", "uniform-max-lt-min",
    "unknown-role-key",
)
def _expected(path: Path) -> str:
    return path.read_text().splitlines()[0].removeprefix("# expect: ")


def _errors(doc: Any) -> list[str]:
    with pytest.raises(SpecError) as info:
        parse_load_spec(doc, "spec.yaml")
    lines = str(info.value).splitlines()
    assert all(line.startswith("spec.yaml: ") for line in lines), lines
    return [line.removeprefix("spec.yaml: ") for line in lines]


def _doc(**over: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "name": "t", "namespace": "ns",
        "workloads": [{"name": "w", "roles": [{"name": "r", "resources": {"cpu": "1"}}]}],
        "arrival": {"curve": "constant", "rate": 2, "duration_s": "10s"},
    }
    doc.update(over)
    return doc


# ------------------------------------------------------------------------------------------------ files


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_shipped_scenarios_read_and_round_trip(path: Path, tmp_path: Path) -> None:
    spec = load_spec(path)
    raw = yaml.safe_load(path.read_text())
    assert spec.name == raw["name"] and spec.namespace == raw["cluster"]["namespace"]
    assert [w.name for w in spec.workloads] == [w["name"] for w in raw["workloads"]]
    as_json = tmp_path / "loadspec.json"
    as_json.write_text(json.dumps(spec.to_doc(), indent=2))
    assert load_spec(as_json) == spec
    as_yaml = tmp_path / "loadspec.yaml"
    as_yaml.write_text(yaml.safe_dump(spec.to_doc()))
    assert load_spec(as_yaml) == spec
    assert spec.arrival.expected_instances() > 0


@pytest.mark.parametrize("name", LOAD_FIXTURES)
def test_bad_fixtures_are_rejected_as_the_fixture_says(name: str) -> None:
    path = BAD / f"{name}.yaml"
    with pytest.raises(SpecError) as info:
        load_spec(path)
    message = str(info.value)
    assert _expected(path) in message, message
    assert all(line.startswith(f"{path}: ") for line in message.splitlines()), message


def test_scenario_paths_for_cluster_fields_and_other_sections_ignored() -> None:
    doc = yaml.safe_load((ROOT / "scenarios" / "smoke.yaml").read_text())
    doc["cluster"]["scheduler_name"] = "Not_A_Name"
    doc["pools"] = "not looked at here"
    assert is_scenario(doc)
    assert _errors(doc) == ["cluster.scheduler_name: expected a lowercase DNS subdomain (a-z, 0-9, '-', '.'), "
                            "got str 'Not_A_Name'"]
    del doc["cluster"]
    spec = parse_load_spec(doc, "s")
    assert (spec.namespace, spec.scheduler_name) == ("hollowscale-load", "default-scheduler")


def test_load_spec_file_errors(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=r"missing\.json: file not found"):
        load_spec(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(SpecError, match=r"bad\.json: not valid JSON"):
        load_spec(bad)
    listed = tmp_path / "list.yaml"
    listed.write_text("- a\n- b\n")
    with pytest.raises(SpecError, match="expected a mapping with workloads and arrival, got a list"):
        load_spec(listed)
    typo = tmp_path / "typo.json"
    typo.write_text(json.dumps(_doc(arival={})))
    with pytest.raises(SpecError, match=r"typo\.json: arival: unknown key"):
        load_spec(typo)


# ------------------------------------------------------------------------------------------------ rules


def test_every_problem_is_reported_at_once() -> None:
    doc = _doc(name="Bad_Name")
    doc["workloads"][0]["exit_codes"] = {"0": 1, 1: -1, 999: 1}
    doc["arrival"] = {"curve": "spike", "rate": -1, "spike_rate": 0, "spike_at_s": "20s", "spike_duration_s": 0,
                      "duration_s": "10s", "steps": []}
    assert _errors(doc) == [
        "name: expected a lowercase DNS label (a-z, 0-9, '-', at most 63 characters), got str 'Bad_Name'",
        "workloads[0].exit_codes.1: expected a weight >= 0, got int -1",
        "workloads[0].exit_codes.999: expected an exit code 0..255 as key, got 999",
        "arrival.steps: not used by curve 'spike' (it takes: rate, spike_at_s, spike_duration_s, spike_rate)",
        "arrival.rate: expected a number >= 0, got -1",
        "arrival.spike_rate: expected a number > 0, got 0",
        "arrival.spike_at_s: expected a time before duration_s (10s), got 20s",
        "arrival.spike_duration_s: expected a duration > 0, got 0s",
    ]


def test_workload_cross_field_rules() -> None:
    doc = _doc()
    doc["workloads"] = [
        {"name": "p", "kind": "Pod", "roles": [{"name": "a", "replicas": 2, "completions": 2},
                                               {"name": "a", "run_duration": "forever"}]},
        {"name": "d", "kind": "Deployment", "run_duration": "forever", "exit_codes": {0: 0.5, 1: 0.5},
         "roles": [{"name": "r"}]},
        {"name": "e", "roles": [{"name": "r", "resources": {"amd.com/gpu": "500m", "cpu": "250m"}}]},
    ]
    assert _errors(doc) == [
        "workloads[0].roles[0].replicas: expected 1 for kind Pod (a bare pod), got 2",
        "workloads[0].roles[0].completions: only valid for kinds Job and JobSet, workload kind is Pod",
        "workloads[0].roles[1].name: duplicate role name 'a'",
        "workloads[0].roles[1].run_duration: kind Pod needs a finite run duration",
        "workloads[1].exit_codes: Deployment pods run forever; exit codes apply to Job and Pod only",
        "workloads[2].roles[0].resources.amd.com/gpu: expected a whole number of amd.com/gpu "
        "(extended resources count whole units), got 500m",
    ]


def test_empty_lists_and_zero_weights() -> None:
    assert _errors(_doc(workloads=[])) == ["workloads: expected at least 1 item(s), got 0"]
    doc = _doc()
    doc["workloads"][0]["roles"] = []
    doc["workloads"][0]["exit_codes"] = {0: 0}
    assert _errors(doc) == ["workloads[0].exit_codes: expected at least one weight > 0"]
    doc["workloads"][0]["exit_codes"] = {0: 1}
    assert _errors(doc) == ["workloads[0].roles: expected at least 1 item(s), got 0"]
    assert _errors(_doc(arrival={"curve": "steps", "steps": [], "duration_s": 5})) == [
        "arrival.steps: expected at least 1 item(s), got 0"]
    assert _errors(_doc(arrival={"curve": "steps", "duration_s": 5})) == ["arrival.steps: is required"]


def test_tolerations_are_typed() -> None:
    role = RoleSpec.model_validate({"name": "r", "tolerations": [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "node.kubernetes.io/unreachable", "operator": "Equal", "value": "x", "effect": "NoExecute",
         "toleration_seconds": 30},
    ]})
    assert [t.to_manifest() for t in role.tolerations] == [
        {"operator": "Exists", "key": "nvidia.com/gpu", "effect": "NoSchedule"},
        {"operator": "Equal", "key": "node.kubernetes.io/unreachable", "value": "x", "effect": "NoExecute",
         "tolerationSeconds": 30},
    ]
    doc = _doc()
    doc["workloads"][0]["roles"][0]["tolerations"] = [{"operator": "Sometimes"}, {"tolerationSeconds": 3},
                                                      {"effect": "NoExecute", "toleration_seconds": -1}]
    assert _errors(doc) == [
        "workloads[0].roles[0].tolerations[0].operator: expected one of Equal, Exists, got 'Sometimes'",
        "workloads[0].roles[0].tolerations[1].tolerationSeconds: unknown key (expected one of: effect, key, "
        "operator, toleration_seconds, value)",
        "workloads[0].roles[0].tolerations[2].toleration_seconds: expected an integer >= 0, got -1",
    ]
    assert TolerationSpec.model_validate({"operator": "Exists"}).to_manifest() == {"operator": "Exists"}


def test_strict_types() -> None:
    doc = _doc()
    doc["workloads"][0]["roles"][0].update(replicas="2", node_selector={"pool": 1})
    doc["arrival"]["seed"] = 1.5
    errors = _errors(doc)
    assert errors[0] == "workloads[0].roles[0].replicas: expected an integer, got str '2'"
    # kubecore's Labels names the key in the path (node_selector.pool) once its leaf wrapper keeps it
    assert errors[1].startswith("workloads[0].roles[0].node_selector")
    assert errors[1].endswith("expected a string value (quote numbers), got int 1")
    assert errors[2:] == ["arrival.seed: expected an integer, got float 1.5"]


def test_with_namespace_is_validated() -> None:
    spec = parse_load_spec(_doc(), "s")
    assert spec.with_namespace("other").namespace == "other"
    assert spec.with_namespace("other").workloads == spec.workloads
    with pytest.raises(SpecError, match="--namespace: namespace: expected a lowercase DNS label"):
        spec.with_namespace("Bad")


def test_workload_counts() -> None:
    w = WorkloadSpec.model_validate({"name": "d", "roles": [
        {"name": "s", "resources": {"nvidia.com/gpu": "8"}}, {"name": "t", "replicas": 4, "resources": {"nvidia.com/gpu": 1}}]})
    assert w.pods_per_instance() == 5 and w.gpus_per_instance() == 12.0
    assert w.run_duration == DurationDist.fixed(10.0) and w.exit_codes == {0: 1.0}
    assert w.run_duration_of(w.roles[0]) == DurationDist.fixed(10.0) and w.startup_delay_of(w.roles[0]) is None


# ------------------------------------------------------------------------------------------------ curve maths


def _arrival(**kw: Any) -> ArrivalSpec:
    return ArrivalSpec.model_validate(kw)


def test_curves() -> None:
    ramp = _arrival(curve="ramp", start_rate=0, end_rate=10, ramp_s=10, duration_s=20, per_user_rate=0.5)
    assert [ramp.rate_at(t) for t in (-1, 0, 5, 10, 19.9, 20)] == [0, 0, 5, 10, 10, 0]
    assert [ramp.users_at(t) for t in (0, 5, 15, 20)] == [0, 10, 20, 0]
    assert ramp.expected_instances() == pytest.approx(50 + 100) and ramp.peak_rate() == 10
    spike = _arrival(curve="spike", rate=1, spike_rate=9, spike_at_s=5, spike_duration_s=2, duration_s=10)
    assert [spike.users_at(t) for t in (0, 5, 6.9, 7)] == [1, 9, 9, 1]
    assert spike.expected_instances() == pytest.approx(10 + 16) and spike.peak_rate() == 9
    steps = _arrival(curve="steps", duration_s="2m", steps=[{"rate": 0.5, "duration_s": "40s"},
                                                             {"rate": 1.5, "duration_s": "40s"}])
    assert [steps.rate_at(t) for t in (0, 39.9, 40, 79.9, 80, 119)] == [0.5, 0.5, 1.5, 1.5, 0, 0]
    assert steps.expected_instances() == pytest.approx(80) and steps.peak_rate() == 1.5
    poisson = _arrival(curve="poisson", rate=3, duration_s="1.05s", max_instances=2)
    assert poisson.rate_at(1) == 3 and poisson.expected_instances() == 2
    assert _arrival(curve="constant", rate=3, duration_s="1.05s").expected_instances() == pytest.approx(3.15)
    # one user at least, paced at the curve's peak when per_user_rate is left out; a faster user is refused
    slow = _arrival(curve="constant", rate=0.1, duration_s=5)
    assert (slow.per_user_rate, slow.users_at(1)) == (0.1, 1)
    with pytest.raises(ValidationError, match=r"(?s)per_user_rate.*at most the curve's peak rate \(0.1/s\)"):
        _arrival(curve="constant", rate=0.1, duration_s=5, per_user_rate=1)
    assert _arrival(curve="steps", duration_s=4, steps=[{"rate": 0.2, "duration_s": 2}]).per_user_rate == 0.2
    # edges inside a dt slot: the slots are cut at the curve's corners, so the integral stays exact
    odd = _arrival(curve="spike", rate=1, spike_rate=5, spike_at_s=0.25, spike_duration_s=0.33, duration_s=1.07)
    assert odd.corners() == pytest.approx([0, 0.25, 0.58, 1.07])
    assert odd.expected_instances() == pytest.approx(1.07 + 4 * 0.33)
    assert odd.expected_instances(dt=0.5) == pytest.approx(1.07 + 4 * 0.33)


@settings(max_examples=60, deadline=None)
@given(st.floats(0.01, 50), st.floats(0, 50), st.floats(1, 500), st.floats(0, 1))
def test_expected_instances_is_the_integral(start: float, end: float, duration: float, ramp_part: float) -> None:
    ramp_s = duration * ramp_part
    a = _arrival(curve="ramp", start_rate=start, end_rate=end + 0.01, ramp_s=ramp_s, duration_s=duration)
    exact = (start + end + 0.01) / 2 * ramp_s + (end + 0.01) * (duration - ramp_s)
    assert a.expected_instances() == pytest.approx(exact, rel=1e-6, abs=1e-6)
    assert a.peak_rate() >= max(a.rate_at(t * duration / 50) for t in range(50))


# ------------------------------------------------------------------------------------------------ round trip

_seconds = st.one_of(st.integers(0, 10**5), st.floats(0, 1e5, allow_nan=False),
                     st.integers(0, 9999).map(lambda n: f"{n}ms"), st.integers(0, 600).map(lambda n: f"{n}s"))
_positive = st.floats(0.001, 1e4)


@st.composite
def _dists(draw: st.DrawFn, finite: bool = True) -> Any:
    kind = draw(st.sampled_from(["fixed", "number", "uniform", "normal", "exponential", "lognormal"]
                                + ([] if finite else ["forever"])))
    if kind == "number":
        return draw(_seconds)
    if kind == "forever":
        return draw(st.sampled_from(["forever", {"dist": "forever"}]))
    if kind == "fixed":
        return {"dist": "fixed", "value": draw(_seconds)}
    lo, hi = sorted([draw(st.floats(0, 1e4)), draw(st.floats(0, 1e4))])
    if kind == "uniform":
        return {"dist": "uniform", "min": lo, "max": hi}
    doc: dict[str, Any] = {"dist": kind}
    if kind == "lognormal":
        doc.update(median=draw(_seconds), sigma=draw(st.floats(0, 3)))
    elif kind == "normal":
        doc.update(mean=draw(_seconds), stddev=draw(_seconds))
    else:
        doc["mean"] = draw(_seconds)
    if draw(st.booleans()):
        doc.update(min=lo, max=hi)
    return doc


@st.composite
def _load_docs(draw: st.DrawFn) -> dict[str, Any]:
    workloads = []
    for i in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["Job", "Pod", "Deployment"]))
        roles = []
        for j in range(draw(st.integers(1, 3))):
            role: dict[str, Any] = {"name": f"r{j}", "resources": {"cpu": draw(st.sampled_from(["1", "250m", 2])),
                                                                  "nvidia.com/gpu": draw(st.integers(0, 8))}}
            if kind != "Pod":
                role["replicas"] = draw(st.integers(1, 10))
            if kind == "Job" and draw(st.booleans()):
                role["completions"] = draw(st.integers(1, 10))
            if draw(st.booleans()):
                role["run_duration"] = draw(_dists(finite=kind != "Deployment"))
            if draw(st.booleans()):
                role["startup_delay"] = draw(_dists())
            if draw(st.booleans()):
                role["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
            roles.append(role)
        w: dict[str, Any] = {"name": f"w{i}", "kind": kind, "share": draw(_positive), "roles": roles,
                             "run_duration": draw(_dists(finite=kind != "Deployment"))}
        if kind != "Deployment":
            w["exit_codes"] = {0: draw(st.floats(0.1, 1)), 1: draw(st.floats(0, 1))}
        if draw(st.booleans()):
            w["priority_class"] = "high"
        workloads.append(w)
    d = draw(st.floats(1, 1e4))
    curve = draw(st.sampled_from(["constant", "poisson", "ramp", "steps", "spike"]))
    arrival: dict[str, Any] = {"curve": curve, "duration_s": d, "seed": draw(st.integers(-5, 10**6))}
    if curve in ("constant", "poisson"):
        arrival["rate"] = draw(_positive)
    elif curve == "ramp":
        arrival.update(end_rate=draw(_positive), ramp_s=d * draw(st.floats(0, 1)))
        if draw(st.booleans()):
            arrival["start_rate"] = draw(st.floats(0, 100))
    elif curve == "steps":
        arrival["steps"] = [{"rate": draw(st.floats(0, 100)), "duration_s": d / 4} for _ in range(draw(st.integers(1, 4)))]
    else:
        arrival.update(rate=draw(st.floats(0, 100)), spike_rate=draw(_positive), spike_at_s=d * draw(st.floats(0, 0.99)),
                       spike_duration_s=draw(_positive))
    if draw(st.booleans()):
        arrival["max_instances"] = draw(st.integers(1, 10**6))
    peak = ArrivalSpec.model_validate(arrival).peak_rate()
    if peak > 0 and draw(st.booleans()):  # per_user_rate may not exceed the peak
        arrival["per_user_rate"] = peak * draw(st.floats(0.01, 1))
    return {"name": "prop", "namespace": "ns", "workloads": workloads, "arrival": arrival}


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_load_docs())
def test_to_doc_round_trips_through_json(doc: dict[str, Any]) -> None:
    spec = parse_load_spec(doc, "generated")
    back = parse_load_spec(json.loads(json.dumps(spec.to_doc())), "loadspec.json")
    assert back == spec
    assert back.to_doc() == spec.to_doc()
    assert isinstance(back, LoadSpec) and math.isfinite(back.arrival.expected_instances())
