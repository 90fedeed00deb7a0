"""The run's pods in the driver cluster: wait until they are Ready, say why one is not, time them.

A pod that cannot start (image missing on the node, a container that exits, a crash loop) ends the
wait at once with its name, node, reason and the last lines of its log, instead of running into the
timeout.  Start times come from the pod itself (creation -> scheduled -> Ready, API clock).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import requests

from hollow.clock import parse_rfc3339
from kubecore.namespaces import RUN_LABEL
from kubecore.watch import list_all

#: waiting reasons that will not fix themselves
FATAL_WAITING = {"ErrImageNeverPull", "ErrImagePull", "ImagePullBackOff", "InvalidImageName", "CrashLoopBackOff",
                 "CreateContainerConfigError", "CreateContainerError", "RunContainerError"}


class PodStartError(RuntimeError):
    """A pod of the run cannot become Ready (which, where, why, its log's tail)."""


def run_pods(session: requests.Session, server: str, namespace: str, run_id: str) -> list[dict[str, Any]]:
    """The run's pods in ``namespace`` (label :data:`RUN_LABEL`)."""
    return list(list_all(session, server, f"/api/v1/namespaces/{namespace}/pods",
                         label_selector=f"{RUN_LABEL}={run_id}"))


def _condition(pod: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == kind:
            return dict(c)
    return None


def is_ready(pod: dict[str, Any]) -> bool:
    c = _condition(pod, "Ready")
    return bool(c and c.get("status") == "True") and not pod["metadata"].get("deletionTimestamp")


def why_not_starting(pod: dict[str, Any]) -> str | None:
    """A reason the pod will not become Ready by itself, or None while it may still."""
    status = pod.get("status") or {}
    if status.get("phase") in ("Failed", "Succeeded"):
        return f"phase {status['phase']} ({status.get('reason') or status.get('message') or 'exited'})"
    for cs in status.get("containerStatuses") or []:
        waiting = (cs.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") in FATAL_WAITING:
            return f"container {cs['name']}: {waiting['reason']}: {waiting.get('message', '')[:300]}"
        last = (cs.get("lastState") or {}).get("terminated") or {}
        if last and cs.get("restartCount", 0) >= 1 and not cs.get("ready"):
            return (f"container {cs['name']} exited with {last.get('exitCode')} ({last.get('reason', '')}) and "
                    f"was restarted {cs['restartCount']} time(s)")
    return None


def log_tail(session: requests.Session, server: str, namespace: str, name: str, lines: int = 20,
             previous: bool = False) -> str:
    """The last lines of a pod's log (through the apiserver and the node's kubelet); '' when unreadable."""
    params: dict[str, str | int] = {"tailLines": lines}
    if previous:
        params["previous"] = "true"
    try:
        r = session.get(f"{server}/api/v1/namespaces/{namespace}/pods/{name}/log", params=params, timeout=15)
    except requests.RequestException:
        return ""
    return r.text if r.status_code == 200 else ""


def start_times(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per pod: node, created, scheduled after, Ready after (seconds, API clock), restarts."""
    out = []
    for pod in sorted(pods, key=lambda p: p["metadata"]["name"]):
        created = parse_rfc3339(pod["metadata"]["creationTimestamp"])
        entry: dict[str, Any] = {"name": pod["metadata"]["name"], "node": (pod.get("spec") or {}).get("nodeName"),
                                 "created_at": pod["metadata"]["creationTimestamp"],
                                 "restarts": sum(cs.get("restartCount", 0)
                                                 for cs in (pod.get("status") or {}).get("containerStatuses") or [])}
        for key, cond in (("scheduled_s", "PodScheduled"), ("ready_s", "Ready")):
            c = _condition(pod, cond)
            if c and c.get("status") == "True" and c.get("lastTransitionTime"):
                entry[key] = round(parse_rfc3339(c["lastTransitionTime"]) - created, 3)
        out.append(entry)
    return out


def wait_ready(session: requests.Session, server: str, namespace: str, run_id: str, expected: int,
               timeout_s: float, sleep: Callable[[float], None] = time.sleep,
               report: Callable[[int, int], None] | None = None) -> list[dict[str, Any]]:
    """Until ``expected`` pods of the run are Ready; the pods.  Raises :class:`PodStartError`."""
    deadline = time.monotonic() + timeout_s
    while True:
        pods = run_pods(session, server, namespace, run_id)
        ready = [p for p in pods if is_ready(p)]
        if report is not None:
            report(len(ready), expected)
        if len(ready) >= expected:
            return pods
        for pod in pods:
            why = why_not_starting(pod)
            if why:
                name = pod["metadata"]["name"]
                tail = log_tail(session, server, namespace, name, previous="restarted" in why)
                raise PodStartError(f"pod {namespace}/{name} on {(pod.get('spec') or {}).get('nodeName')}: {why}"
                                    + (f"\n--- its log:\n{tail.strip()[-1500:]}" if tail.strip() else ""))
        if time.monotonic() > deadline:
            waiting = sorted(p["metadata"]["name"] for p in pods if not is_ready(p))
            raise PodStartError(f"{len(ready)}/{expected} pods of the run Ready after {timeout_s:g}s "
                                f"(not Ready: {', '.join(waiting) or 'none created'})")
        sleep(1.0)
