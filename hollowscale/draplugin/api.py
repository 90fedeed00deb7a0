"""The few API calls the plugin makes, with the node's own credentials (the kubelet's kubeconfig).

The node authorizer allows exactly these to ``system:node:<name>``: get its Node, get a ResourceClaim that a
pod bound to it uses (the graph node <- pod <- claim), and get/create/update/delete ResourceSlices whose
``spec.nodeName`` is the node (``plugin/pkg/auth/authorizer/node/node_authorizer.go``,
``authorizeResourceSlice``; list only with a ``spec.nodeName`` field selector), so no RBAC of its own is
needed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote

import requests

from kubecore.config import load_endpoint
from kubecore.watch import session_for

RESOURCE_PATH = "/apis/resource.k8s.io/v1"
TIMEOUT_S = 10.0


class ApiError(RuntimeError):
    """An API call failed; ``status`` is the HTTP status (0: no answer)."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


class Api:
    """GET/POST/PUT of JSON objects against one apiserver."""

    def __init__(self, server: str, session: requests.Session) -> None:
        self.server = server.rstrip("/")
        self.session = session

    @classmethod
    def from_kubeconfig(cls, path: Path) -> Api:
        endpoint = load_endpoint(path)
        return cls(endpoint.server, session_for(endpoint, pool=2))

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any] | None:
        """The object returned; None for 404; :class:`ApiError` otherwise."""
        try:
            resp = self.session.request(method, self.server + path, json=body, timeout=TIMEOUT_S)
        except requests.RequestException as exc:
            raise ApiError(f"{method} {path}: {exc}") from None
        if resp.status_code == 404:
            return None
        if resp.status_code >= 300:
            try:
                message = resp.json().get("message", resp.text)
            except ValueError:
                message = resp.text
            raise ApiError(f"{method} {path}: HTTP {resp.status_code}: {message}", resp.status_code)
        out: dict[str, Any] = resp.json()
        return out

    def node(self, name: str) -> dict[str, Any] | None:
        return self._call("GET", f"/api/v1/nodes/{quote(name)}")

    def claim(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self._call("GET", f"{RESOURCE_PATH}/namespaces/{quote(namespace)}/resourceclaims/{quote(name)}")

    def node_slices(self, node: str, driver: str) -> list[dict[str, Any]]:
        """The driver's slices of ``node`` (a list with a ``spec.nodeName`` selector: the node authorizer lets
        a node GET only a slice it already knows of, so a missing one would be 403, not 404)."""
        selector = quote(f"spec.nodeName={node},spec.driver={driver}")
        out = self._call("GET", f"{RESOURCE_PATH}/resourceslices?fieldSelector={selector}")
        return list((out or {}).get("items") or [])

    def delete_slice(self, name: str) -> None:
        self._call("DELETE", f"{RESOURCE_PATH}/resourceslices/{quote(name)}")

    def create_slice(self, obj: dict[str, Any]) -> dict[str, Any]:
        out = self._call("POST", f"{RESOURCE_PATH}/resourceslices", obj)
        if out is None:
            raise ApiError("POST resourceslices: HTTP 404 (is resource.k8s.io/v1 served?)", 404)
        return out

    def update_slice(self, obj: dict[str, Any]) -> dict[str, Any]:
        out = self._call("PUT", f"{RESOURCE_PATH}/resourceslices/{quote(obj['metadata']['name'])}", obj)
        if out is None:
            raise ApiError(f"PUT resourceslices/{obj['metadata']['name']}: HTTP 404 (deleted meanwhile)", 404)
        return out
