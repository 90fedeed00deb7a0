"""Scenario validation: every shipped scenario loads; every bad file fails with file, field path, expectation."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from hollowscale.scenario import DEFAULT_SLOS, ScenarioError, load_scenario, parse_scenario

ROOT = Path(__file__).resolve().parents[2]
BAD = sorted((ROOT / "tests" / "fixtures" / "scenarios" / "bad").glob("*.yaml"))
#: the shipped scenarios with a load (a trace scenario replays a trace instead: tests/unit/test_trace_scenario.py)
SHIPPED = sorted(p for p in (ROOT / "scenarios").glob("*.yaml") if "workload" not in yaml.safe_load(p.read_text()))


@pytest.fixture(autouse=True)
def _no_ambient_kubeconfig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Validation of kind/existing backends looks at $KUBECONFIG and ~/.kube/config: keep both away."""
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


def expected(path: Path) -> str:
    first = path.read_text().splitlines()[0]
    assert first.startswith("# expect: "), f"{path} must start with '# expect: <error substring>'"
    return first.removeprefix("# expect: ")


def test_there_are_many_bad_files() -> None:
    assert len(BAD) >= 30


@pytest.mark.parametrize("path", BAD, ids=lambda p: p.stem)
def test_bad_scenario_is_rejected_with_path_and_expectation(path: Path) -> None:
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    message = str(info.value)
    assert expected(path) in message, message
    for line in message.splitlines():  # every line names the file
        assert line.startswith(str(path)), line


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_shipped_scenarios_validate(path: Path) -> None:
    sc = load_scenario(path)
    assert sc.nodes_total > 0 and sc.workloads and sc.arrival.expected_instances() > 0


def test_required_scenarios_are_shipped() -> None:
    names = {p.stem for p in SHIPPED}
    assert {"default", "smoke", "gpu-contention"} <= names


def test_default_scenario_shape() -> None:
    sc = load_scenario(ROOT / "scenarios" / "default.yaml")
    assert 900 <= sc.nodes_total <= 1100
    products = {str(p.labels.get("nvidia.com/gpu.product")) for p in sc.pools}
    assert {"Tesla-V100-SXM2-32GB", "Tesla-P4"} <= products
    distill = next(w for w in sc.workloads if w.name == "distill")
    gpus = sorted(r.resources.get("nvidia.com/gpu") for r in distill.roles)
    assert gpus == ["1", "8"] and any(r.replicas > 1 for r in distill.roles)
    assert any(w.kind == "Job" and w.pods_per_instance() > 1 and w.gpus_per_instance() > 0 for w in sc.workloads
               if w.name != "distill")
    assert any(w.gpus_per_instance() == 0 for w in sc.workloads)
    assert sc.arrival.curve == "ramp" and 240 <= sc.arrival.duration_s <= 360
    assert sc.arrival.rate_at(1) < sc.arrival.rate_at(sc.arrival.duration_s - 1)


def test_gpu_contention_demand_exceeds_supply() -> None:
    sc = load_scenario(ROOT / "scenarios" / "gpu-contention.yaml")
    # GPU-seconds asked for vs GPU-seconds the pools offer during the load
    demand = sum(
        w.share / sum(x.share for x in sc.workloads) * w.gpus_per_instance() * (w.run_duration.mean() or 0)
        for w in sc.workloads
    ) * sc.arrival.expected_instances()
    assert demand > 2 * sc.gpus_total * sc.arrival.duration_s


def test_smoke_is_small() -> None:
    sc = load_scenario(ROOT / "scenarios" / "smoke.yaml")
    assert sc.nodes_total <= 50 and sc.arrival.duration_s <= 60 and sc.arrival.expected_instances() <= 60


def test_all_errors_are_reported_not_only_the_first(tmp_path: Path) -> None:
    doc = {"name": "x", "pools": [{"name": "a", "count": 1, "resources": {"cpu": "4", "memory": "8Gi"}}],
           "workloads": [{"name": "w", "kind": "Nope", "roles": [{"name": "r", "resources": {"cpu": "x"}}]}],
           "arrival": {"curve": "constant", "rate": 0, "duration_s": 10}, "bogus": 1}
    with pytest.raises(ScenarioError) as info:
        parse_scenario(doc, "mem.yaml")
    paths = {e.path for e in info.value.errors}
    assert {"workloads[0].kind", "workloads[0].roles[0].resources.cpu", "arrival.rate", "bogus"} <= paths


def test_defaults_and_overrides() -> None:
    doc = yaml.safe_load((ROOT / "scenarios" / "smoke.yaml").read_text())
    doc.pop("slos")
    sc = parse_scenario(doc, "smoke")
    assert [s.name for s in sc.slos] == [s.name for s in DEFAULT_SLOS]
    doc["slos"] = [{"name": "pod_startup_p99", "metric": "pod_startup_latency_ms.p99", "threshold": 2000}]
    sc = parse_scenario(doc, "smoke")
    assert next(s for s in sc.slos if s.name == "pod_startup_p99").threshold == 2000
    assert len(sc.slos) == len(DEFAULT_SLOS)
    doc["slo_defaults"] = False
    assert [s.name for s in parse_scenario(doc, "smoke").slos] == ["pod_startup_p99"]


def test_existing_backend_reads_kubeconfig_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    doc = yaml.safe_load((ROOT / "scenarios" / "smoke.yaml").read_text())
    doc["cluster"] = {"backend": "existing", "namespace": "x"}
    with pytest.raises(ScenarioError, match=r"cluster\.kubeconfig: is required"):
        parse_scenario(doc, "s.yaml")
    kc = tmp_path / "kc"
    kc.write_text("apiVersion: v1\nkind: Config\n")
    monkeypatch.setenv("KUBECONFIG", str(kc))
    sc = parse_scenario(doc, "s.yaml")
    assert sc.cluster.kubeconfig_path() == str(kc)


@pytest.mark.parametrize("namespace", ["default", "kube-system", "kube-public", "kube-node-lease"])
def test_namespaces_the_run_does_not_own_are_refused(namespace: str) -> None:
    doc = yaml.safe_load((ROOT / "scenarios" / "smoke.yaml").read_text())
    doc["cluster"]["namespace"] = namespace
    with pytest.raises(ScenarioError, match=r"cluster\.namespace: expected a namespace of the run.s own"):
        parse_scenario(doc, "s.yaml")


def _fair_share(**tenant: object) -> dict[str, object]:
    doc: dict[str, object] = yaml.safe_load((ROOT / "scenarios" / "fair-share.yaml").read_text())
    tenants = doc["tenants"]
    assert isinstance(tenants, list)
    tenants[0] = {**tenants[0], **tenant}
    return doc


@pytest.mark.parametrize("namespace", ["default", "kube-system"])
def test_a_tenant_namespace_the_run_does_not_own_is_one_line_not_a_traceback(namespace: str, tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(_fair_share(namespace=namespace)))
    with pytest.raises(ScenarioError) as info:  # a pydantic ValidationError escaped from the second pass before
        load_scenario(path)
    assert str(info.value) == (f"{path}: tenants[0].namespace: expected a namespace of the run's own, got "
                               f"{namespace!r} (it holds the cluster's own objects: default, kube-node-lease, "
                               "kube-public, kube-system are refused)")


def test_a_tenant_whose_default_namespace_or_queue_would_not_work_is_one_line_each() -> None:
    doc = _fair_share(name="system")
    doc["cluster"] = {**doc["cluster"], "namespace": "kube"}  # type: ignore[dict-item]
    with pytest.raises(ScenarioError, match=r"^s\.yaml: tenants\[0\]\.name: its default namespace <cluster\.namespace>"
                                            r"-<name> does not work: expected a namespace of the run.s own, got "
                                            r"'kube-system' .*; give the tenant a namespace$"):
        parse_scenario(doc, "s.yaml")
    with pytest.raises(ScenarioError, match=r"^s\.yaml: tenants\[0\]\.name: expected at most 57 characters \(its queue "
                                            r"'a{60}-queue' must fit 63\), got 60$"):
        parse_scenario(_fair_share(name="a" * 60, namespace="team-a"), "s.yaml")


def test_a_distill_namespace_that_would_not_work_is_found_in_the_first_pass() -> None:
    doc = yaml.safe_load((ROOT / "scenarios" / "distill-e2e.yaml").read_text())
    doc["cluster"]["namespace"] = "a" * 62  # <namespace>-distill cut to 63 ends in '-'
    with pytest.raises(ScenarioError, match=r"^s\.yaml: cluster\.namespace: the distill jobs' namespace "
                                            r"<cluster\.namespace>-distill does not work: expected a lowercase DNS label"):
        parse_scenario(doc, "s.yaml")


def test_validate_prints_a_tenant_namespace_problem_as_one_line(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from hollowscale.cli import main

    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(_fair_share(namespace="kube-system")))
    result = CliRunner().invoke(main, ["validate", str(path)])
    assert result.exit_code == 1 and not isinstance(result.exception, ValueError), result.exception
    assert result.output.splitlines() == [f"{path}: tenants[0].namespace: expected a namespace of the run's own, got "
                                          "'kube-system' (it holds the cluster's own objects: default, "
                                          "kube-node-lease, kube-public, kube-system are refused)"]


def test_scenario_to_dict_and_load_spec() -> None:
    sc = load_scenario(ROOT / "scenarios" / "default.yaml")
    d = sc.to_dict()
    assert d["load"]["namespace"] == sc.cluster.namespace == sc.load.namespace
    assert [p["name"] for p in d["pools"]] == [p.name for p in sc.pools]
    assert sc.load.arrival is sc.arrival and sc.load.workloads is sc.workloads


def test_curves() -> None:
    base = {"name": "c", "pools": [{"name": "a", "count": 1, "resources": {"cpu": "4", "memory": "8Gi"}}],
            "workloads": [{"name": "w", "roles": [{"name": "r", "resources": {"cpu": "1"}}]}]}
    ramp = parse_scenario({**base, "arrival": {"curve": "ramp", "start_rate": 1, "end_rate": 5, "ramp_s": 40,
                                               "duration_s": 100}}, "r").arrival
    assert ramp.rate_at(0) == 1 and ramp.rate_at(20) == pytest.approx(3) and ramp.rate_at(60) == 5 and ramp.rate_at(100) == 0
    assert ramp.expected_instances() == pytest.approx(40 * 3 + 60 * 5, rel=1e-3)
    spike = parse_scenario({**base, "arrival": {"curve": "spike", "rate": 1, "spike_rate": 10, "spike_at_s": 10,
                                                "spike_duration_s": 5, "duration_s": 30}}, "s").arrival
    assert [spike.rate_at(t) for t in (9, 10, 14.9, 15)] == [1, 10, 10, 1]
    steps = parse_scenario({**base, "arrival": {"curve": "steps", "duration_s": 30, "steps": [
        {"rate": 2, "duration_s": 10}, {"rate": 4, "duration_s": 10}]}}, "st").arrival
    assert [steps.rate_at(t) for t in (0, 10, 25)] == [2, 4, 0]
