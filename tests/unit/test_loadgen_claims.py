"""What a role's DRA claim renders to (templates, shared claims, pods), against golden files.

``tests/fixtures/dra/claims-*.json`` hold the objects of one instance and the run's templates; a change
shows as a diff of a readable file.  Regenerate after an intended change with
``HOLLOWSCALE_UPDATE_GOLDEN=1 pytest tests/unit/test_loadgen_claims.py`` and review the diff.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from kubecore.schema import SpecError
from loadgen.spec import parse_load_spec
from loadgen.workloads import WorkloadMix, claim_template_name, claim_templates

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "dra"
UPDATE = os.environ.get("HOLLOWSCALE_UPDATE_GOLDEN") == "1"
SELECTOR = "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0"


def _spec(roles: list[dict[str, Any]], **workload: Any) -> Any:
    return parse_load_spec({"name": "claims", "namespace": "team-a",
                            "workloads": [{"name": "train", "kind": "Job", "run_duration": "30s", **workload,
                                           "roles": roles}],
                            "arrival": {"curve": "constant", "rate": 1, "duration_s": 10, "seed": 3}}, "claims.yaml")


CASES: dict[str, list[dict[str, Any]]] = {
    "claims-template": [{"name": "worker", "replicas": 2, "resources": {"cpu": "4", "memory": "16Gi"},
                         "claim": {"device_class": "gpu.nvidia.com", "count": 2, "selector": SELECTOR}}],
    "claims-shared": [{"name": "student", "replicas": 3, "resources": {"cpu": "4"},
                       "claim": {"device_class": "gpu.nvidia.com", "shared": "instance"}}],
    "claims-memory": [{"name": "teacher", "replicas": 1, "resources": {"cpu": "2"},
                       "claim": {"device_class": "gpu.nvidia.com", "memory": "20Gi"}}],
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_claim_rendering_golden(name: str) -> None:
    spec = _spec(CASES[name])
    mix = WorkloadMix(spec, run_id="run-1")
    got = {"templates": [{"path": s.path, "body": s.body} for s in claim_templates(spec, "run-1")],
           "instance": [{"kind": s.kind, "path": s.path, "body": s.body} for s in mix.next_instance()]}
    path = FIXTURES / f"{name}.json"
    text = json.dumps(got, indent=1, sort_keys=True) + "\n"
    if UPDATE:
        path.write_text(text)
    assert path.exists(), f"{path} missing: run with HOLLOWSCALE_UPDATE_GOLDEN=1 and review it"
    assert text == path.read_text(), f"{path.name} differs: HOLLOWSCALE_UPDATE_GOLDEN=1 regenerates; review the diff"


def test_pods_reference_their_claim_and_count_the_devices_they_hold_alone() -> None:
    spec = _spec(CASES["claims-template"])
    (job,) = WorkloadMix(spec, run_id="r").next_instance()
    pod = job.body["spec"]["template"]
    assert pod["spec"]["resourceClaims"] == [{"name": "gpu",
                                              "resourceClaimTemplateName": claim_template_name("r", "train", "worker")}]
    assert pod["spec"]["containers"][0]["resources"]["claims"] == [{"name": "gpu"}]
    assert pod["metadata"]["labels"]["hollowscale.io/gpus"] == "2"
    shared = WorkloadMix(_spec(CASES["claims-shared"]), run_id="r").next_instance()
    assert [s.kind for s in shared] == ["ResourceClaim", "Job"]
    assert shared[1].body["spec"]["template"]["spec"]["resourceClaims"][0]["resourceClaimName"] == \
        shared[0].body["metadata"]["name"]
    assert shared[1].body["spec"]["template"]["metadata"]["labels"]["hollowscale.io/gpus"] == "0"


def test_shared_claims_go_first_with_tenants_and_gangs_too() -> None:
    spec = parse_load_spec({"name": "c", "tenants": [{"name": "a", "namespace": "ns-a"}],
                            "workloads": [{"name": "d", "kind": "Job", "gang": {"min_members": "all"},
                                           "roles": CASES["claims-shared"]}],
                            "arrival": {"curve": "constant", "rate": 1, "duration_s": 10}}, "c.yaml")
    subs = WorkloadMix(spec, run_id="r").next_instance()
    assert subs[0].kind == "ResourceClaim" and subs[0].path.startswith("/apis/resource.k8s.io/v1/namespaces/ns-a/")
    assert [s.kind for s in claim_templates(spec, "r")] == []


def test_bad_claims_are_refused_with_their_field() -> None:
    with pytest.raises(SpecError) as exc:
        _spec([{"name": "w", "claim": {"device_class": "Not_A_Class", "count": 40, "shared": "gang", "memory": "lots"}}])
    text = str(exc.value)
    for field in ("roles[0].claim.device_class", "roles[0].claim.count", "roles[0].claim.shared",
                  "roles[0].claim.memory"):
        assert field in text, (field, text)
