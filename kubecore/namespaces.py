"""Use a namespace without ever deleting what we did not create.

A run *claims* its namespace: it creates it when absent (and then owns it), or uses one that already
exists (and then owns only the objects it labels with its run id).  A namespace still terminating
from an earlier run is waited for, not mistaken for "already there": creating objects in it would
fail with 404 once it is gone.  :func:`release_namespace` deletes the namespace only when this run
created it (by its uid: one someone made again under the name stays), and otherwise only this run's
labelled objects.  So that the label alone never picks an object the run did not create, a namespace
that is not the run's own and already holds objects with the run's label is refused at claim time.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import orjson
import requests

#: the label every object a run creates carries (value: the run id)
RUN_LABEL = "hollowscale.io/run"
#: namespaces no run may claim: they hold the cluster's own objects
RESERVED_NAMESPACES = frozenset({"default", "kube-system", "kube-public", "kube-node-lease"})
#: collections a run creates objects in (deleted by label selector when the namespace is not ours)
RUN_COLLECTIONS = ("/apis/batch/v1/namespaces/{ns}/jobs", "/apis/apps/v1/namespaces/{ns}/deployments",
                   "/api/v1/namespaces/{ns}/pods",
                   # batch scheduling: in-tree gang objects, Volcano's (absent APIs answer 404: skipped)
                   "/apis/scheduling.k8s.io/v1alpha2/namespaces/{ns}/podgroups",
                   "/apis/scheduling.k8s.io/v1alpha2/namespaces/{ns}/workloads",
                   "/apis/batch.volcano.sh/v1alpha1/namespaces/{ns}/jobs",
                   "/apis/scheduling.volcano.sh/v1beta1/namespaces/{ns}/podgroups",
                   # JobSet (its Jobs and pods go with it)
                   "/apis/jobset.x-k8s.io/v1alpha2/namespaces/{ns}/jobsets",
                   # DRA: claims shared by an instance's pods, the roles' templates (generated claims go with pods)
                   "/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims",
                   "/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaimtemplates")


class NamespaceError(RuntimeError):
    """The namespace cannot be used (reserved, stuck terminating, refused by the API server)."""


@dataclass(frozen=True)
class NamespaceClaim:
    """A namespace a run uses.

    Attributes:
        name: the namespace.
        run_id: the run that claimed it (value of :data:`RUN_LABEL` on what the run creates).
        created: True when this run created the namespace (and so may delete it).
        uid: the namespace's uid when this run created it ('' otherwise): only that one is deleted.
    """

    name: str
    run_id: str
    created: bool
    uid: str = ""


def _get(session: requests.Session, server: str, name: str) -> dict[str, object] | None:
    r = session.get(f"{server}/api/v1/namespaces/{name}", timeout=30)
    if r.status_code == 404:
        return None
    r.raise_for_status()
    doc: dict[str, object] = orjson.loads(r.content)
    return doc


def _phase(doc: dict[str, object]) -> str:
    status = doc.get("status")
    return str(status.get("phase", "")) if isinstance(status, dict) else ""


def claim_namespace(session: requests.Session, server: str, name: str, run_id: str,
                    wait_terminating_s: float = 180.0, log: Callable[[str], None] | None = None) -> NamespaceClaim:
    """Create ``name`` (owned by ``run_id``) or use it as it is; wait out a deletion in progress.

    Raises:
        NamespaceError: reserved name, still terminating after ``wait_terminating_s``, or refused.
    """
    if name in RESERVED_NAMESPACES:
        raise NamespaceError(f"namespace {name!r} holds the cluster's own objects; choose another")
    deadline = time.monotonic() + wait_terminating_s
    said = False
    while True:
        doc = _get(session, server, name)
        if doc is not None and _phase(doc) != "Terminating":
            if _labels(doc).get(RUN_LABEL) != run_id:  # not this run's own: its label must pick nothing yet
                _refuse_labelled(session, server, name, run_id)
            return NamespaceClaim(name, run_id, created=False)
        if doc is None:
            body = {"apiVersion": "v1", "kind": "Namespace",
                    "metadata": {"name": name, "labels": {RUN_LABEL: run_id}}}
            r = session.post(f"{server}/api/v1/namespaces", data=orjson.dumps(body),
                             headers={"Content-Type": "application/json"}, timeout=30)
            if r.status_code in (200, 201):
                return NamespaceClaim(name, run_id, created=True, uid=str(orjson.loads(r.content)["metadata"]["uid"]))
            if r.status_code != 409:
                raise NamespaceError(f"creating namespace {name}: HTTP {r.status_code} {r.text[:200]}")
            continue  # created or terminating meanwhile: look again
        if time.monotonic() > deadline:
            raise NamespaceError(f"namespace {name} is still terminating after {wait_terminating_s:g}s "
                                 "(an earlier run's deletion); try again later or choose another namespace")
        if log is not None and not said:
            log(f"namespace {name} is terminating (an earlier run's); waiting for it to go")
            said = True
        time.sleep(0.5)


def _labels(doc: dict[str, object]) -> dict[str, str]:
    meta = doc.get("metadata")
    labels = meta.get("labels") if isinstance(meta, dict) else None
    return labels if isinstance(labels, dict) else {}


def _refuse_labelled(session: requests.Session, server: str, name: str, run_id: str) -> None:
    """Raise when namespace ``name`` already holds an object labelled with ``run_id`` (the run would delete it)."""
    for template in RUN_COLLECTIONS:
        path = template.format(ns=name)
        r = session.get(f"{server}{path}", params={"labelSelector": f"{RUN_LABEL}={run_id}", "limit": "1"},
                        timeout=30)
        if r.status_code == 404:  # an API this cluster does not serve
            continue
        r.raise_for_status()
        items = orjson.loads(r.content).get("items") or []
        if items:
            raise NamespaceError(
                f"namespace {name} already holds {items[0].get('kind') or path.rsplit('/', 1)[-1]} "
                f"{items[0]['metadata']['name']} labelled {RUN_LABEL}={run_id}, which this run did not create (the "
                "run deletes what carries its label at the end): use another run id or remove those objects")


def release_namespace(session: requests.Session, server: str, claim: NamespaceClaim) -> None:
    """Delete what the run created: the namespace if it created it, else only its labelled objects.

    Raises:
        NamespaceError: a delete the API server refused (404 counts as done).
    """
    if claim.created:
        doc = _get(session, server, claim.name)
        if doc is None or _labels(doc).get(RUN_LABEL) != claim.run_id:
            return  # gone, or replaced by someone else's namespace of the same name
        body = orjson.dumps({"preconditions": {"uid": claim.uid}}) if claim.uid else None
        r = session.delete(f"{server}/api/v1/namespaces/{claim.name}", data=body,
                           headers={"Content-Type": "application/json"}, timeout=30)
        if r.status_code == 409 and claim.uid:
            return  # replaced by another namespace of that name (a uid that is not ours): left as it is
        if r.status_code not in (200, 202, 404):
            raise NamespaceError(f"deleting namespace {claim.name}: HTTP {r.status_code} {r.text[:200]}")
        return
    selector = f"{RUN_LABEL}={claim.run_id}"
    for template in RUN_COLLECTIONS:
        path = template.format(ns=claim.name)
        r = session.delete(f"{server}{path}", params={"labelSelector": selector, "propagationPolicy": "Background"},
                           timeout=60)
        if r.status_code not in (200, 202, 404):
            raise NamespaceError(f"deleting this run's objects in {claim.name} ({path}): "
                                 f"HTTP {r.status_code} {r.text[:200]}")
