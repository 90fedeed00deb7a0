"""The cluster objects of a DRA run: its DeviceClasses (created before the agents, deleted after, by the uid
their creation returned) and its claims' server-side dry run and templates (before the load).

A DeviceClass of the same name that the run did not create is never changed nor deleted: when its spec is
the one the run would create (an earlier run's, or a driver's chart) it is used as it is; when it differs
the run stops before anything starts (its devices would be selected by someone else's rule).

Everything only the apiserver can judge (a CEL selector that does not compile, a request it refuses) is
asked before the load with ``?dryRun=All``: each ResourceClaimTemplate and one ResourceClaim per shared
role, every problem at once; nothing is created when one fails.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import requests

from hollow.dra import API_VERSION
from kubecore.namespaces import RUN_LABEL
from loadgen.spec import LoadSpec
from loadgen.workloads import WorkloadMix, claim_templates

CLASSES_PATH = f"/apis/{API_VERSION}/deviceclasses"


class DraObjectError(RuntimeError):
    """A DeviceClass the run needs is someone else's and differs, or the apiserver refused a claim."""


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    keys = ("selectors", "extendedResourceName", "config")
    return all((a.get("spec") or {}).get(k) == (b.get("spec") or {}).get(k) for k in keys)


@dataclass
class DeviceClasses:
    """Creates the run's DeviceClasses and deletes exactly those it created."""

    session: requests.Session
    server: str
    created: list[dict[str, Any]] = field(default_factory=list)  # name, uid
    reused: list[str] = field(default_factory=list)

    def create(self, classes: list[dict[str, Any]]) -> None:
        for obj in classes:
            name = obj["metadata"]["name"]
            r = self.session.post(self.server + CLASSES_PATH, json=obj, timeout=30)
            if r.status_code == 201:
                self.created.append({"name": name, "uid": r.json()["metadata"]["uid"]})
                continue
            if r.status_code == 409:
                got = self.session.get(f"{self.server}{CLASSES_PATH}/{name}", timeout=30)
                existing = got.json() if got.ok else {}
                if got.ok and _same(existing, obj):
                    owner = ((existing.get("metadata") or {}).get("labels") or {}).get(RUN_LABEL)
                    self.reused.append(f"{name} (" + (f"left by run {owner}" if owner else "not created by hollowscale")
                                       + "; same spec: used, not deleted)")
                    continue
                raise DraObjectError(f"DeviceClass {name} exists with another spec and was not created by this run; "
                                     "the run never changes what it did not create: delete it or use its cluster as "
                                     "it is (backend existing, pools without gpus.expose dra)")
            raise DraObjectError(f"creating DeviceClass {name}: HTTP {r.status_code}: {r.text[:300]}")

    def delete_all(self) -> list[str]:
        """Delete the classes this run created, by uid (a 409 is a class someone made again: left as it is)."""
        errors = []
        for c in reversed(self.created):
            try:
                r = self.session.delete(f"{self.server}{CLASSES_PATH}/{c['name']}", timeout=30,
                                        json={"preconditions": {"uid": c["uid"]}})
                if r.status_code not in (200, 202, 404, 409):
                    errors.append(f"deleting DeviceClass {c['name']}: HTTP {r.status_code}")
            except requests.RequestException as exc:
                errors.append(f"deleting DeviceClass {c['name']}: {exc}")
        self.created.clear()
        return errors


def claim_objects(spec: LoadSpec, run_id: str) -> list[tuple[str, dict[str, Any], str]]:
    """(path, body, where in the scenario) of what the load's claims are made from: each role's
    ResourceClaimTemplate and one shared ResourceClaim per shared role (a sample of what the load creates)."""
    out = [(s.path, s.body, f"workloads[{[w.name for w in spec.workloads].index(s.workload)}].roles"
            f"[{[r.name for r in spec.workload(s.workload).roles].index(s.role)}].claim")
           for s in claim_templates(spec, run_id)]
    mix = WorkloadMix(spec, run_id=run_id, stream="dry-run")
    for wi, w in enumerate(spec.workloads):
        for sub in mix.shared_claims(w, f"{w.name}-dry-run", spec.namespaces()[0]):
            ri = [r.name for r in w.roles].index(sub.role)
            out.append((sub.path, sub.body, f"workloads[{wi}].roles[{ri}].claim"))
    return out


def dry_run(session: requests.Session, server: str, objects: list[tuple[str, dict[str, Any], str]]) -> list[str]:
    """Ask the apiserver to create each object with ``?dryRun=All``; the refusals, each with where it comes from."""
    problems = []
    for path, body, where in objects:
        r = session.post(server + path, params={"dryRun": "All"}, json=body, timeout=30)
        if r.status_code not in (200, 201):
            try:
                message = r.json().get("message") or r.text
            except ValueError:
                message = r.text
            problems.append(f"{where}: the apiserver refuses it (dry run, HTTP {r.status_code}): {message[:600]}")
    return problems


def create_templates(session: requests.Session, server: str, spec: LoadSpec, run_id: str) -> int:
    """Create the roles' ResourceClaimTemplates in every namespace of the load (one that exists is kept)."""
    made = 0
    for s in claim_templates(spec, run_id):
        r = session.post(server + s.path, json=s.body, timeout=30)
        if r.status_code == 201:
            made += 1
        elif r.status_code != 409:
            raise DraObjectError(f"creating ResourceClaimTemplate {s.body['metadata']['name']}: HTTP {r.status_code}: "
                                 f"{r.text[:300]}")
    return made
