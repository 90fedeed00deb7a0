"""Create and delete the rendered objects through the API, recording what this run created.

Every object is created by name (POST); each one the apiserver accepted is appended to the run's
record (``created.json`` in the run folder) before the next is tried, so a run that is interrupted
half-way still knows exactly what it made.  Deleting walks that record backwards, each object by the
uid its creation returned: an object that existed before the run (a name clash answers 409 and is not
recorded) is never touched, nor is one that someone deleted and made again under a recorded name.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import orjson
import requests

JSON = {"Content-Type": "application/json"}
#: kinds that live outside namespaces (the rest of what deploy/hollowscale holds is namespaced)
CLUSTER_SCOPED = {"ClusterRole", "ClusterRoleBinding", "Namespace", "Node"}


class ObjectError(RuntimeError):
    """An object could not be created (kind, name, namespace, the apiserver's answer)."""


@dataclass(frozen=True)
class Created:
    """One object this run created (enough to delete it by name and uid)."""

    api_version: str
    kind: str
    name: str
    namespace: str | None
    uid: str = ""  # '' in a record written before uids were kept: deleted by name then

    @property
    def path(self) -> str:
        return object_path(self.api_version, self.kind, self.namespace, self.name)

    def text(self) -> str:
        return f"{self.kind} {self.namespace + '/' if self.namespace else ''}{self.name}"


def collection_path(api_version: str, kind: str, namespace: str | None) -> str:
    """``/api/v1/namespaces/ns/secrets``, ``/apis/rbac.authorization.k8s.io/v1/clusterroles`` ..."""
    group = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    plural = kind.lower() + ("es" if kind.endswith("s") else "s")
    if kind in CLUSTER_SCOPED or namespace is None:
        return f"{group}/{plural}"
    return f"{group}/namespaces/{namespace}/{plural}"


def object_path(api_version: str, kind: str, namespace: str | None, name: str) -> str:
    return f"{collection_path(api_version, kind, namespace)}/{name}"


class ObjectLedger:
    """The objects one run created, in creation order, kept in ``record`` as they are created."""

    def __init__(self, session: requests.Session, server: str, record: Path) -> None:
        self.http = session
        self.server = server
        self.record = record
        self.created: list[Created] = []

    def _save(self) -> None:
        self.record.parent.mkdir(parents=True, exist_ok=True)
        self.record.write_text(json.dumps([asdict(c) for c in self.created], indent=2))

    def create(self, doc: dict[str, Any]) -> dict[str, Any]:
        """POST ``doc``; the created object (raises :class:`ObjectError` on anything but 201/200)."""
        meta = doc["metadata"]
        ns = None if doc["kind"] in CLUSTER_SCOPED else meta.get("namespace")
        url = self.server + collection_path(doc["apiVersion"], doc["kind"], ns)
        r = self.http.post(url, data=orjson.dumps(doc), headers=JSON, timeout=30)
        if r.status_code not in (200, 201):
            where = f"{doc['kind']} {ns + '/' if ns else ''}{meta['name']}"
            why = "it exists already (left as it is)" if r.status_code == 409 else f"HTTP {r.status_code}"
            raise ObjectError(f"creating {where}: {why}: {r.text[:300]}")
        out: dict[str, Any] = r.json()
        self.created.append(Created(doc["apiVersion"], doc["kind"], meta["name"], ns,
                                    str((out.get("metadata") or {}).get("uid") or "")))
        self._save()
        return out

    def create_all(self, docs: list[dict[str, Any]]) -> None:
        for doc in docs:
            self.create(doc)

    def delete_all(self, log: Callable[[str], None] = print) -> list[str]:
        """Delete what this run created, newest first (pods go with their owners: background
        propagation); the errors, as text.  Objects already gone count as deleted."""
        errors: list[str] = []
        for obj in reversed(self.created):
            options: dict[str, Any] = {"propagationPolicy": "Background"}
            if obj.uid:
                options["preconditions"] = {"uid": obj.uid}  # 409: the name is someone else's object now
            try:
                r = self.http.delete(self.server + obj.path, data=orjson.dumps(options), headers=JSON, timeout=30)
                if r.status_code not in (200, 202, 404, 409):
                    errors.append(f"deleting {obj.text()}: HTTP {r.status_code} {r.text[:200]}")
            except requests.RequestException as exc:
                errors.append(f"deleting {obj.text()}: {exc}")
        log(f"in-cluster: deleted {len(self.created) - len(errors)} object(s) this run created")
        return errors

    def remaining(self) -> list[Created]:
        """Created objects the apiserver still has (404, or another uid under the name: gone)."""
        left = []
        for obj in self.created:
            try:
                r = self.http.get(self.server + obj.path, timeout=15)
            except requests.RequestException:
                left.append(obj)
                continue
            if r.status_code == 404:
                continue
            if obj.uid and r.ok and (r.json().get("metadata") or {}).get("uid") != obj.uid:
                continue
            left.append(obj)
        return left

    def wait_gone(self, timeout_s: float, sleep: Callable[[float], None] = time.sleep) -> list[Created]:
        """Until every created object is gone (finalizers, terminating pods' owners); what is left."""
        deadline = time.monotonic() + timeout_s
        left = self.remaining()
        while left and time.monotonic() < deadline:
            sleep(1.0)
            left = self.remaining()
        return left
