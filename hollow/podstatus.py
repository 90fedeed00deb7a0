"""Pod status patches, as pure functions: Running, terminated, restarted, and the final DELETE options.

Every patch is a strategic merge of ``pods/NAME/status`` carrying ``metadata.uid`` as precondition
(the kubelet's trick: a pod recreated under the same name has a new uid and the patch fails instead of
touching it).  Conditions merge by ``type`` and container statuses by ``name``, so the scheduler's
PodScheduled condition is kept as is; a container's old ``running`` state is deleted with ``null``
when it terminates, otherwise the merge would leave both states.
"""

from __future__ import annotations

from hollow.bodies import DeleteOptions, PodCondition, PodStatusBody, PodStatusPatch
from hollow.clock import rfc3339
from hollow.stages import PodFacts


def container_id(facts: PodFacts, name: str, restarts: int) -> str:
    """A stable fake container id (changes per restart, as a real one does)."""
    return f"hollow://{facts.uid[:13]}-{name}-{restarts}"


def _cond(kind: str, status: str, at: str, reason: str | None = None) -> PodCondition:
    c = PodCondition(type=kind, status=status, lastProbeTime=None, lastTransitionTime=at)
    if reason:
        c["reason"] = reason
    return c


def running_patch(facts: PodFacts, now_wall: float, pod_ip: str, host_ip: str) -> PodStatusPatch:
    """Pending -> Running: init containers completed (sidecars running), containers running and ready."""
    now = rfc3339(now_wall)
    init_statuses = []
    for name, image, policy in facts.init_containers:
        cid = container_id(facts, name, 0)
        base = {"name": name, "image": image, "imageID": image, "containerID": cid, "restartCount": 0}
        if policy == "Always":  # a sidecar keeps running next to the app containers
            init_statuses.append({**base, "ready": True, "started": True, "state": {"running": {"startedAt": now}}})
        else:
            init_statuses.append({**base, "ready": True, "started": False, "state": {"terminated": {
                "exitCode": 0, "reason": "Completed", "startedAt": now, "finishedAt": now, "containerID": cid}}})
    statuses = [{"name": name, "image": image, "imageID": image, "containerID": container_id(facts, name, 0),
                 "ready": True, "started": True, "restartCount": 0, "state": {"running": {"startedAt": now}}}
                for name, image in facts.containers]
    conditions = [_cond("PodReadyToStartContainers", "True", now), _cond("Initialized", "True", now),
                  _cond("ContainersReady", "True", now), _cond("Ready", "True", now)]
    if not facts.has_scheduled_condition:
        conditions.append(_cond("PodScheduled", "True", now))
    status = PodStatusBody(phase="Running", startTime=now, hostIP=host_ip, hostIPs=[{"ip": host_ip}],
                           podIP=pod_ip, podIPs=[{"ip": pod_ip}], conditions=conditions,
                           containerStatuses=statuses)
    if init_statuses:
        status["initContainerStatuses"] = init_statuses
    return PodStatusPatch(metadata={"uid": facts.uid}, status=status)


def terminated_patch(facts: PodFacts, now_wall: float, code: int, started_wall: float | None = None) -> PodStatusPatch:
    """Running (or Pending) -> Succeeded (exit 0) or Failed: every container terminated with ``code``."""
    now = rfc3339(now_wall)
    started = rfc3339(started_wall if started_wall is not None else (facts.run_started_at or now_wall))
    reason = "Completed" if code == 0 else "Error"
    statuses = [{"name": name, "image": image, "imageID": image, "ready": False, "started": False,
                 "restartCount": facts.restart_count,
                 "containerID": container_id(facts, name, facts.restart_count),
                 "state": {"running": None, "waiting": None, "terminated": {
                     "exitCode": code, "reason": reason, "startedAt": started, "finishedAt": now,
                     "containerID": container_id(facts, name, facts.restart_count)}}}
                for name, image in facts.containers]
    conditions = [_cond("PodReadyToStartContainers", "False", now), _cond("ContainersReady", "False", now, "PodCompleted"),
                  _cond("Ready", "False", now, "PodCompleted")]
    status = PodStatusBody(phase="Succeeded" if code == 0 else "Failed", conditions=conditions,
                           containerStatuses=statuses)
    return PodStatusPatch(metadata={"uid": facts.uid}, status=status)


def restarted_patch(facts: PodFacts, now_wall: float, code: int, started_wall: float | None = None) -> PodStatusPatch:
    """restartPolicy OnFailure and a non-zero exit: the containers restart in place (restartCount + 1)."""
    now = rfc3339(now_wall)
    started = rfc3339(started_wall if started_wall is not None else (facts.run_started_at or now_wall))
    n = facts.restart_count + 1
    statuses = [{"name": name, "image": image, "imageID": image, "ready": True, "started": True,
                 "restartCount": n, "containerID": container_id(facts, name, n),
                 "lastState": {"terminated": {"exitCode": code, "reason": "Error", "startedAt": started,
                                              "finishedAt": now,
                                              "containerID": container_id(facts, name, n - 1)}},
                 "state": {"running": {"startedAt": now}, "terminated": None, "waiting": None}}
                for name, image in facts.containers]
    return PodStatusPatch(metadata={"uid": facts.uid}, status=PodStatusBody(containerStatuses=statuses))


def delete_options(uid: str) -> DeleteOptions:
    """DELETE grace 0 that only removes the pod with this uid (the kubelet's final delete)."""
    return DeleteOptions(apiVersion="v1", kind="DeleteOptions", gracePeriodSeconds=0, preconditions={"uid": uid})


def deletion_exit_code(facts: PodFacts) -> int:
    """Exit code of containers stopped because their pod is being deleted.

    A service (restartPolicy Always) handles SIGTERM and exits 0; a batch container interrupted before
    its run ended is reported as killed by SIGTERM (143), so a Job counts it as failed, not done.
    """
    return 0 if facts.restart_policy == "Always" else 143
