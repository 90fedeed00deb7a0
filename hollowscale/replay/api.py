"""Where a replay writes, and how: the API server, the run's namespace and label, its GPU mode and scheduler.

Both drivers (:class:`hollowscale.replay.driver.PaperReplay`, :class:`hollowscale.replay.timed.TimedReplay`)
create the same objects the same way; only *when* differs.  So what they share lives here once: the
paths, the manifests of a pod and its claim for the run's GPU mode (:mod:`hollowscale.replay.pods`), and
the create and delete calls with the answers each accepts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson
import requests

from hollowscale.replay.pods import claim_manifest, pod_manifest
from hollowscale.trace.model import TracePod
from hollowscale.trace.paper import SequencedPod

_JSON = {"Content-Type": "application/json"}


@dataclass(frozen=True)
class ReplayApi:
    """The API server a replay creates its pods and claims in.

    Attributes:
        session, server: the API server (an authenticated session and its URL).
        namespace: where the pods and claims are created (claimed by the caller).
        run_id: the value of the run label on everything created.
        gpu_mode: ``counted``, ``dra-shared`` or ``dra-whole`` (:mod:`hollowscale.replay.pods`).
        scheduler_name: ``spec.schedulerName`` of the pods.
    """

    session: requests.Session
    server: str
    namespace: str
    run_id: str
    gpu_mode: str
    scheduler_name: str = "default-scheduler"

    @property
    def pods_path(self) -> str:
        return f"/api/v1/namespaces/{self.namespace}/pods"

    @property
    def claims_path(self) -> str:
        return f"/apis/resource.k8s.io/v1/namespaces/{self.namespace}/resourceclaims"

    def claimed(self, pod: TracePod) -> bool:
        """Whether ``pod`` gets its GPUs through a ResourceClaim of its own (a DRA mode and a GPU asked)."""
        return self.gpu_mode != "counted" and pod.num_gpu > 0

    def pod_body(self, sp: SequencedPod, width: int) -> dict[str, Any]:
        """The pod's manifest for this run (its name numbered to ``width`` digits)."""
        return pod_manifest(sp, self.run_id, self.gpu_mode, self.scheduler_name, width=width)

    def claim_body(self, name: str, pod: TracePod) -> dict[str, Any]:
        """The claim named like its pod, for this run's DRA mode."""
        return claim_manifest(name, pod, self.run_id, whole=self.gpu_mode == "dra-whole")

    def post(self, path: str, body: dict[str, Any]) -> None:
        """Create ``body`` at ``path``; anything but 201 raises, naming the object and the answer."""
        r = self.session.post(self.server + path, data=orjson.dumps(body), timeout=30, headers=_JSON)
        if r.status_code != 201:
            raise RuntimeError(f"POST {path} {body['metadata']['name']}: {r.status_code} {r.text[:300]}")

    def delete(self, path: str) -> str | None:
        """Delete ``path`` at once (grace 0); ``None`` when it went or was gone, else what went wrong (the
        drivers record it and go on: a pod left behind is the namespace teardown's)."""
        try:
            r = self.session.delete(self.server + path, timeout=30, data=orjson.dumps({"gracePeriodSeconds": 0}),
                                    headers=_JSON)
        except requests.RequestException as exc:
            return f"DELETE {path}: {exc}"
        if r.status_code not in (200, 202, 404):
            return f"DELETE {path}: {r.status_code} {r.text[:200]}"
        return None


__all__ = ["ReplayApi"]
