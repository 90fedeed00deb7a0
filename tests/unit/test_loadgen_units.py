"""Load generator pieces without a cluster: spec parsing, arrival curves -> users, manifests."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest

from hollowscale.scenario import load_scenario
from loadgen.shapes import expected_instances, rate_at, users_at
from loadgen.spec import load_spec, normalise, seconds
from loadgen.workloads import ANN_EXIT, ANN_RUN, LABEL_INSTANCE, WorkloadMix, go_duration, sample_duration

ROOT = Path(__file__).resolve().parents[2]


def test_yaml_and_resolved_spec_agree() -> None:
    """loadgen reading the YAML itself and hollowscale's resolved JSON give the same load."""
    sc = load_scenario(ROOT / "scenarios" / "default.yaml")
    from_json = normalise(sc.to_load_spec())
    from_yaml = load_spec(ROOT / "scenarios" / "default.yaml")
    assert from_json["arrival"]["duration_s"] == from_yaml["arrival"]["duration_s"] == 300
    assert expected_instances(from_json["arrival"]) == pytest.approx(sc.arrival.expected_instances(), rel=1e-6)
    assert [w["name"] for w in from_json["workloads"]] == [w["name"] for w in from_yaml["workloads"]]
    a = WorkloadMix(from_json, "r", stream="s").next_instance()
    b = WorkloadMix(from_yaml, "r", stream="s").next_instance()
    assert [s.body for s in a] == [s.body for s in b]


def test_curves_match_the_scenario_model() -> None:
    for name in ("default", "smoke", "gpu-contention"):
        sc = load_scenario(ROOT / "scenarios" / f"{name}.yaml")
        spec = normalise(sc.to_load_spec())
        for t in [i * 0.7 for i in range(int(sc.arrival.duration_s / 0.7) + 3)]:
            assert rate_at(spec["arrival"], t) == pytest.approx(sc.arrival.rate_at(t))


def test_users_follow_the_rate() -> None:
    arrival = {"curve": "ramp", "start_rate": 0, "end_rate": 10, "ramp_s": 10, "duration_s": 20, "per_user_rate": 0.5}
    assert users_at(arrival, 0) == 0
    assert users_at(arrival, 5) == 10  # 5/s at 0.5/s per user
    assert users_at(arrival, 15) == 20
    assert users_at(arrival, 20) == 0
    spike = {"curve": "spike", "rate": 1, "spike_rate": 9, "spike_at_s": 5, "spike_duration_s": 2, "duration_s": 10,
             "per_user_rate": 1}
    assert [users_at(spike, t) for t in (0, 5, 6.9, 7)] == [1, 9, 9, 1]


def test_manifests_for_each_kind() -> None:
    spec = load_spec(ROOT / "scenarios" / "smoke.yaml")
    spec["workloads"].append({**spec["workloads"][0], "name": "svc", "kind": "Deployment", "exit_codes": {0: 1.0}})
    mix = WorkloadMix(spec, "run-1", stream="t")
    by = {w["name"]: w for w in spec["workloads"]}
    distill = [mix.build(by["distill"], r, "i1") for r in by["distill"]["roles"]]
    student, teacher = distill[0].body, distill[1].body
    assert distill[0].path == "/apis/batch/v1/namespaces/hollowscale-smoke/jobs"
    assert student["spec"]["parallelism"] == 1 and teacher["spec"]["parallelism"] == 2
    c = student["spec"]["template"]["spec"]["containers"][0]
    assert c["resources"]["limits"] == {"nvidia.com/gpu": "8"} and c["resources"]["requests"]["cpu"] == "8"
    tmpl = student["spec"]["template"]
    assert tmpl["metadata"]["annotations"][ANN_RUN] == "4s" and tmpl["metadata"]["annotations"][ANN_EXIT] == "0"
    assert tmpl["spec"]["restartPolicy"] == "Never" and tmpl["spec"]["tolerations"][0]["operator"] == "Exists"
    assert tmpl["metadata"]["labels"][LABEL_INSTANCE] == "i1"
    pod = mix.build(by["inference"], by["inference"]["roles"][0], "i2")
    assert pod.path.endswith("/pods") and pod.body["kind"] == "Pod" and pod.body["metadata"]["generateName"]
    dep = mix.build(by["svc"], by["svc"]["roles"][0], "i3").body
    assert dep["kind"] == "Deployment" and dep["spec"]["template"]["spec"]["restartPolicy"] == "Always"
    assert dep["spec"]["template"]["metadata"]["annotations"][ANN_RUN] == "forever"
    assert dep["spec"]["selector"]["matchLabels"] == {LABEL_INSTANCE: "i3"}


def test_mix_follows_shares() -> None:
    spec = load_spec(ROOT / "scenarios" / "smoke.yaml")
    mix = WorkloadMix(spec, "r", stream="share")
    counts: dict[str, int] = {}
    for _ in range(4000):
        subs = mix.next_instance()
        counts[subs[0].workload] = counts.get(subs[0].workload, 0) + 1
    assert counts["cpu-batch"] / 4000 == pytest.approx(0.5, abs=0.03)
    assert counts["distill"] / 4000 == pytest.approx(0.3, abs=0.03)


def test_exit_code_mix_and_durations() -> None:
    spec = normalise({"name": "x", "workloads": [{"name": "w", "exit_codes": {0: 0.9, 3: 0.1},
                      "run_duration": {"dist": "exponential", "mean": "10s", "max": "30s"}, "roles": [{"name": "r"}]}],
                      "arrival": {"curve": "constant", "rate": 1, "duration_s": 1}})
    mix = WorkloadMix(spec, "r", stream="e")
    codes = [mix.next_instance()[0].body["spec"]["template"]["metadata"]["annotations"][ANN_EXIT] for _ in range(2000)]
    assert codes.count("3") / 2000 == pytest.approx(0.1, abs=0.025)
    rng = random.Random(1)
    draws = [sample_duration({"dist": "exponential", "mean_s": 10, "max_s": 30}, rng) for _ in range(5000)]
    assert max(draws) <= 30 and sum(draws) / len(draws) == pytest.approx(10 * (1 - 2.718281828 ** -3), rel=0.06)
    assert sample_duration({"dist": "forever"}, rng) is None


@pytest.mark.parametrize(("s", "text"), [(12.5, "12.500s"), (0, "0s"), (90, "90s"), (0.001, "0.001s")])
def test_go_duration(s: float, text: str) -> None:
    assert go_duration(s) == text
    assert seconds(text) == pytest.approx(s)


def test_loadgen_imports_no_orchestrator_module() -> None:
    """Layering: loadgen may use hollowscale.kube only, never hollow, distill or the rest of hollowscale."""
    code = ("import sys; import loadgen.spec, loadgen.shapes, loadgen.workloads, loadgen.kubehttp, loadgen.latency;"
            "bad=[m for m in sys.modules if m.split('.')[0] in ('hollow','distill') or "
            "(m.startswith('hollowscale') and m not in ('hollowscale',) and not m.startswith('hollowscale.kube'))];"
            "print(bad); sys.exit(1 if bad else 0)")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
