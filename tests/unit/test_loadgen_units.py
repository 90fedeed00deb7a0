"""Load generator pieces without a cluster: manifests from the typed spec, the mix, the shape, headers."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from freshpython import run_python

from kubecore.distributions import DurationDist
from kubecore.durations import parse_go_duration
from loadgen.shapes import SPAWN_RATE_MIN, shape_tick
from loadgen.spec import LoadSpec, load_spec, parse_load_spec
from loadgen.workloads import (
    ANN_DELAY,
    ANN_EXIT,
    ANN_RUN,
    LABEL_GPUS,
    LABEL_INSTANCE,
    LABEL_ROLE,
    LABEL_RUN,
    LABEL_WORKLOAD,
    WorkloadMix,
    annotation_duration,
)

ROOT = Path(__file__).resolve().parents[2]


def _smoke_with_deployment() -> LoadSpec:
    doc = load_spec(ROOT / "scenarios" / "smoke.yaml").to_doc()
    svc = dict(doc["workloads"][0], name="svc", kind="Deployment", exit_codes={"0": 1.0}, run_duration="forever")
    doc["workloads"].append(svc)
    return parse_load_spec(doc, "smoke+svc")


def test_manifests_for_each_kind() -> None:
    spec = _smoke_with_deployment()
    mix = WorkloadMix(spec, "run-1", stream="t")
    distill = spec.workload("distill")
    subs = [mix.build(distill, r, "i1") for r in distill.roles]
    student, teacher = subs[0].body, subs[1].body
    assert subs[0].path == "/apis/batch/v1/namespaces/hollowscale-smoke/jobs"
    assert (subs[0].workload, subs[0].role, subs[0].kind) == ("distill", "student", "Job")
    assert student["spec"]["parallelism"] == 1 and teacher["spec"]["parallelism"] == 2
    assert teacher["spec"]["completions"] == 2 and student["spec"]["backoffLimit"] == 0
    assert student["metadata"] == {"generateName": "distill-student-", "labels": {
        LABEL_RUN: "run-1", LABEL_WORKLOAD: "distill", LABEL_ROLE: "student", LABEL_INSTANCE: "i1"}}
    c = student["spec"]["template"]["spec"]["containers"][0]
    assert c["resources"]["limits"] == {"nvidia.com/gpu": "8"} and c["resources"]["requests"]["cpu"] == "8"
    tmpl = student["spec"]["template"]
    assert tmpl["metadata"]["annotations"] == {ANN_RUN: "4s", ANN_EXIT: "0"}
    assert tmpl["metadata"]["labels"][LABEL_INSTANCE] == "i1" and tmpl["metadata"]["labels"][LABEL_GPUS] == "8"
    assert tmpl["spec"]["restartPolicy"] == "Never" and tmpl["spec"]["schedulerName"] == "default-scheduler"
    assert tmpl["spec"]["tolerations"] == [{"operator": "Exists", "key": "nvidia.com/gpu", "effect": "NoSchedule"}]
    assert tmpl["spec"]["nodeSelector"] == {"nvidia.com/gpu.product": "Tesla-V100-SXM2-32GB"}
    inference = spec.workload("inference")
    pod = mix.build(inference, inference.roles[0], "i2")
    assert pod.path.endswith("/namespaces/hollowscale-smoke/pods") and pod.body["kind"] == "Pod"
    assert pod.body["metadata"]["generateName"] == "inference-server-" and "completions" not in pod.body["spec"]
    assert pod.body["metadata"]["labels"][LABEL_GPUS] == "1"
    svc = spec.workload("svc")
    dep = mix.build(svc, svc.roles[0], "i3").body
    assert dep["kind"] == "Deployment" and dep["spec"]["replicas"] == 2
    assert dep["spec"]["template"]["spec"]["restartPolicy"] == "Always"
    assert dep["spec"]["template"]["metadata"]["annotations"] == {ANN_RUN: "forever"}
    assert dep["spec"]["selector"]["matchLabels"] == {LABEL_INSTANCE: "i3"}
    assert json.loads(json.dumps(dep)) == dep  # plain JSON


def test_next_instance_submits_every_role_and_is_deterministic() -> None:
    spec = load_spec(ROOT / "scenarios" / "default.yaml")
    a = [[s.body for s in WorkloadMix(spec, "r", stream="s").next_instance()] for _ in range(3)]
    mix1, mix2 = WorkloadMix(spec, "r", stream="s"), WorkloadMix(spec, "r", stream="s")
    first = [mix1.next_instance() for _ in range(20)]
    assert [[s.body for s in i] for i in first] == [[s.body for s in mix2.next_instance()] for _ in range(20)]
    assert a[0] == a[1] == a[2]
    other = WorkloadMix(spec, "r", stream="other")
    assert [[s.body for s in i] for i in first] != [[s.body for s in other.next_instance()] for _ in range(20)]
    for n, subs in enumerate(first, start=1):
        w = spec.workload(subs[0].workload)
        assert [s.role for s in subs] == [r.name for r in w.roles]
        assert {s.body["metadata"]["labels"][LABEL_INSTANCE] for s in subs} == {f"{w.name}-s-{n}"}


def test_mix_follows_shares() -> None:
    spec = load_spec(ROOT / "scenarios" / "smoke.yaml")
    mix = WorkloadMix(spec, "r", stream="share")
    counts: dict[str, int] = {}
    for _ in range(4000):
        subs = mix.next_instance()
        counts[subs[0].workload] = counts.get(subs[0].workload, 0) + 1
    assert counts["cpu-batch"] / 4000 == pytest.approx(0.5, abs=0.03)
    assert counts["distill"] / 4000 == pytest.approx(0.3, abs=0.03)


def _one_workload(**w: Any) -> LoadSpec:
    return parse_load_spec({"name": "x", "workloads": [{"name": "w", "roles": [{"name": "r"}], **w}],
                            "arrival": {"curve": "constant", "rate": 1, "duration_s": 1}}, "x")


def test_exit_code_mix_and_drawn_durations() -> None:
    spec = _one_workload(exit_codes={0: 0.9, 3: 0.1}, run_duration={"dist": "exponential", "mean": "10s", "max": "30s"},
                         startup_delay={"dist": "uniform", "min": "1s", "max": "2s"})
    mix = WorkloadMix(spec, "r", stream="e")
    anns = [mix.next_instance()[0].body["spec"]["template"]["metadata"]["annotations"] for _ in range(3000)]
    codes = [a[ANN_EXIT] for a in anns]
    assert codes.count("3") / len(codes) == pytest.approx(0.1, abs=0.025)
    runs = [parse_go_duration(a[ANN_RUN]) for a in anns]
    assert max(runs) <= 30 and sum(runs) / len(runs) == pytest.approx(10 * (1 - 2.718281828 ** -3), rel=0.06)
    assert all(abs(r * 1000 - round(r * 1000)) < 1e-6 for r in runs)  # whole milliseconds
    delays = [parse_go_duration(a[ANN_DELAY]) for a in anns]
    assert min(delays) >= 1 and max(delays) <= 2


def test_role_overrides_and_priority_class() -> None:
    spec = _one_workload(priority_class="batch-low", run_duration="5s",
                         roles=[{"name": "a", "run_duration": "250ms", "startup_delay": "1.5s"}, {"name": "b"}])
    a, b = WorkloadMix(spec, "r").next_instance()
    assert a.body["spec"]["template"]["metadata"]["annotations"] == {ANN_RUN: "250ms", ANN_DELAY: "1.5s", ANN_EXIT: "0"}
    assert b.body["spec"]["template"]["metadata"]["annotations"] == {ANN_RUN: "5s", ANN_EXIT: "0"}
    assert a.body["spec"]["template"]["spec"]["priorityClassName"] == "batch-low"


@pytest.mark.parametrize(("s", "text"), [(12.5, "12.5s"), (0, "0s"), (90, "1m30s"), (0.001, "1ms"),
                                         (12.3456, "12.346s"), (0.0004, "0s"), (float("inf"), "forever")])
def test_annotation_duration(s: float, text: str) -> None:
    assert annotation_duration(s) == text
    assert parse_go_duration(text) == pytest.approx(round(s, 3))


def test_sample_is_kubecores() -> None:
    """The mix draws with DurationDist.sample: same generator state, same draws."""
    dist = DurationDist("uniform", minimum=2, maximum=4)
    spec = _one_workload(run_duration={"dist": "uniform", "min": "2s", "max": "4s"})
    mix = WorkloadMix(spec, "r", stream="k")
    rng = random.Random(f"{spec.arrival.seed}/k")
    for _ in range(50):
        rng.choices([0], weights=[1.0])  # the mix's choice of workload
        want = annotation_duration(dist.sample(rng))
        rng.choices([0], weights=[1.0])  # the exit code
        got = mix.next_instance()[0].body["spec"]["template"]["metadata"]["annotations"][ANN_RUN]
        assert got == want


def test_shape_follows_the_curve_and_stops() -> None:
    spec = parse_load_spec({"name": "s", "workloads": [{"name": "w", "roles": [{"name": "r"}]}],
                            "arrival": {"curve": "ramp", "start_rate": 0, "end_rate": 10, "ramp_s": 10,
                                        "duration_s": 20, "per_user_rate": 0.5}}, "s")
    a = spec.arrival
    assert shape_tick(a, 0) == (0, SPAWN_RATE_MIN)
    assert shape_tick(a, 5) == (10, SPAWN_RATE_MIN)
    assert shape_tick(a, 19.9) == (20, SPAWN_RATE_MIN)
    assert shape_tick(a, 20) is None
    big = parse_load_spec({"name": "s", "workloads": [{"name": "w", "roles": [{"name": "r"}]}],
                           "arrival": {"curve": "constant", "rate": 400, "duration_s": 5}}, "s").arrival
    assert shape_tick(big, 1) == (400, 400.0)


@pytest.mark.integration  # starts a process
def test_request_headers_carry_the_current_token() -> None:
    code = """
import itertools
from kubecore.config import KubeEndpoint
from loadgen.locustfile import HEADERS, request_headers
tokens = itertools.count(1)
plain = request_headers(KubeEndpoint("https://x"))
assert plain() is HEADERS and "Authorization" not in plain(), plain()
static = request_headers(KubeEndpoint("https://x", token="abc"))
assert static() == {**HEADERS, "Authorization": "Bearer abc"}, static()
rotating = request_headers(KubeEndpoint("https://x", token="t0", refresh=lambda: f"t{next(tokens)}"))
assert [rotating()["Authorization"] for _ in range(2)] == ["Bearer t1", "Bearer t2"]
assert "Authorization" not in HEADERS
print("ok")
"""
    r = run_python(code)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr


@pytest.mark.integration  # starts a process
def test_bad_spec_stops_locust_with_the_message(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nworkloads: [{name: w, kind: CronJob, roles: [{name: r}]}]\n"
                   "arrival: {curve: constant, rate: 1, duration_s: 1}\n")
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\ncurrent-context: a\n"
                          "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
                          "users: [{name: u, user: {token: t}}]\ncontexts: [{name: a, context: {cluster: c, user: u}}]\n")
    r = subprocess.run([sys.executable, "-m", "locust", "-f", str(ROOT / "loadgen" / "locustfile.py"), "--headless",
                        "--kubeconfig", str(kubeconfig), "--load-spec", str(bad)],
                       cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert r.returncode != 0
    assert f"loadgen: {bad}: workloads[0].kind: expected one of Job, Pod, Deployment, JobSet, got 'CronJob'" in r.stderr, r.stderr


@pytest.mark.integration  # starts a process
def test_loadgen_imports_only_kubecore() -> None:
    """Layering: loadgen imports kubecore and nothing else of ours (never hollowscale, hollow or distill)."""
    code = ("import sys; import loadgen.locustfile, loadgen.spec, loadgen.shapes, loadgen.workloads, loadgen.latency;"
            "ours=('hollowscale','hollow','distill');"
            "bad=sorted(m for m in sys.modules if m.split('.')[0] in ours);"
            "print(bad); sys.exit(1 if bad else 0)")
    r = run_python(code)
    assert r.returncode == 0, r.stdout + r.stderr


def test_annotation_duration_is_gos_format_to_the_millisecond() -> None:
    import math
    import random

    from kubecore.durations import format_go_duration, parse_go_duration
    from loadgen.workloads import annotation_duration

    rng = random.Random(3)
    samples = [0.0, 0.0004, 0.0005, 0.25, 1.0, 12.3456, 59.9994, 59.9996, 60.0, 90.5, 3723.5, math.inf]
    samples += [rng.uniform(0, 200) for _ in range(2000)] + [rng.uniform(0, 2) for _ in range(500)]
    for s in samples:
        text = annotation_duration(s)
        assert text == format_go_duration(s if math.isinf(s) else round(s, 3)), s
        assert math.isinf(s) or abs(parse_go_duration(text) - s) <= 0.0005 + 1e-9
