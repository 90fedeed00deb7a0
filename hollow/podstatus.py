"""Pod status patches, as pure functions: Running, terminated, restarted, and the final DELETE options.

Every patch is a strategic merge of ``pods/NAME/status`` carrying ``metadata.uid`` as precondition
(the kubelet's trick: a pod recreated under the same name has a new uid and the patch fails instead of
touching it).  Conditions merge by ``type``, so the scheduler's PodScheduled condition is kept as
is and a condition's unchanged fields need not be sent again.  ``containerStatuses`` and
``initContainerStatuses`` are atomic lists (``+listType=atomic``): each write replaces them whole,
so every field of a container status is paid in every write that carries them, while pod-level
fields (``observedGeneration``, ``resources``, ``allocatedResources``) are paid once.

What is written, field by field, and what is deliberately left out (with the bytes it would cost per
write) is listed in docs/hollow-fidelity.md, "Hollow-node fidelity: what is deliberately left out"; the timing of
Ready for containers with probes is :mod:`hollow.probes`.
"""

from __future__ import annotations

from typing import Any

from hollow.bodies import DeleteOptions, PodCondition, PodStatusBody, PodStatusPatch
from hollow.clock import rfc3339
from hollow.podresources import container_resource_fields, pod_resource_fields
from hollow.stages import PodFacts


def container_id(facts: PodFacts, name: str, restarts: int) -> str:
    """A stable fake container id (changes per restart, as a real one does)."""
    return f"hollow://{facts.uid[:13]}-{name}-{restarts}"


#: condition reasons of the kubelet (``pkg/kubelet/status/generate.go``)
POD_COMPLETED = "PodCompleted"
POD_FAILED = "PodFailed"
CONTAINERS_NOT_READY = "ContainersNotReady"


def _cond(kind: str, status: str, at: str | None, reason: str | None = None, gen: int = 0,
          message: str | None = None) -> PodCondition:
    """One condition; ``at`` None keeps the stored transition time (the status did not change).

    ``lastProbeTime`` is not sent: the kubelet never sets it on pod conditions and the API shows null
    either way.  ``gen`` > 0 adds ``observedGeneration`` (see :func:`_generation`).
    """
    c = PodCondition(type=kind, status=status)
    if at is not None:
        c["lastTransitionTime"] = at
    if reason:
        c["reason"] = reason
    if message:
        c["message"] = message
    if gen:
        c["observedGeneration"] = gen
    return c


def _generation(facts: PodFacts) -> int:
    """The generation to write as ``observedGeneration``, or 0 when the stored one is current.

    The kubelet reports ``metadata.generation`` in the pod's and each of its conditions'
    ``observedGeneration``.  Conditions merge by type and the apiserver keeps a stored
    ``observedGeneration`` that a write leaves out (``preserveOldObservedGeneration``), so it is only
    written when the pod's status does not already carry the current generation: in the first write
    and after a spec change, not in every write.
    """
    return facts.generation if facts.generation and facts.observed_generation != facts.generation else 0


def _unready_message(facts: PodFacts) -> str:
    """The kubelet's message, Go's ``%s`` of a string slice: ``[a b]``."""
    return f"containers with unready status: [{' '.join(name for name, _ in facts.containers)}]"


def _base(facts: PodFacts, name: str, image: str, cid: str, restarts: int, index: int,
          init: bool = False) -> dict[str, Any]:
    """The fields every status of one container carries (the list is atomic: each write has them all)."""
    res = (facts.init_resources if init else facts.resources)
    out = {"name": name, "image": image, "imageID": image, "containerID": cid, "restartCount": restarts}
    out.update(container_resource_fields(res[index] if index < len(res) else None))
    return out


def running_patch(facts: PodFacts, now_wall: float, pod_ip: str, host_ip: str) -> PodStatusPatch:
    """Pending -> Running: init containers completed (sidecars running), containers running.

    Ready at once, unless a container has a readiness or startup probe: then the containers are not
    ready yet (ContainersReady and Ready False, ``ContainersNotReady``) and :func:`ready_patch` follows
    when the probes would first pass (:mod:`hollow.probes`), as the kubelet writes it.
    """
    now = rfc3339(now_wall)
    gen = _generation(facts)
    gated = facts.ready_delay is not None
    init_statuses = []
    for i, (name, image, policy) in enumerate(facts.init_containers):
        cid = container_id(facts, name, 0)
        base = _base(facts, name, image, cid, 0, i, init=True)
        if policy == "Always":  # a sidecar keeps running next to the app containers
            init_statuses.append({**base, "ready": True, "started": True, "state": {"running": {"startedAt": now}}})
        else:
            init_statuses.append({**base, "ready": True, "started": False, "state": {"terminated": {
                "exitCode": 0, "reason": "Completed", "startedAt": now, "finishedAt": now, "containerID": cid}}})
    statuses = [{**_base(facts, name, image, container_id(facts, name, 0), 0, i),
                 "ready": not gated, "started": not facts.has_startup_probe,
                 "state": {"running": {"startedAt": now}}}
                for i, (name, image) in enumerate(facts.containers)]
    if gated:
        message = _unready_message(facts)
        ready = [_cond("ContainersReady", "False", now, CONTAINERS_NOT_READY, gen, message),
                 _cond("Ready", "False", now, CONTAINERS_NOT_READY, gen, message)]
    else:
        ready = [_cond("ContainersReady", "True", now, gen=gen), _cond("Ready", "True", now, gen=gen)]
    conditions = [_cond("PodReadyToStartContainers", "True", now, gen=gen), _cond("Initialized", "True", now, gen=gen),
                  *ready]
    if not facts.has_scheduled_condition:
        conditions.append(_cond("PodScheduled", "True", now, gen=gen))
    elif gen:  # the binding wrote it without observedGeneration; keep its transition time
        conditions.append(_cond("PodScheduled", "True", None, gen=gen))
    status = PodStatusBody(phase="Running", startTime=now, hostIP=host_ip, hostIPs=[{"ip": host_ip}],
                           podIP=pod_ip, podIPs=[{"ip": pod_ip}], conditions=conditions,
                           containerStatuses=statuses)
    status.update(pod_resource_fields(facts))  # type: ignore[typeddict-item]
    if gen:
        status["observedGeneration"] = gen
    if init_statuses:
        status["initContainerStatuses"] = init_statuses
    return PodStatusPatch(metadata={"uid": facts.uid}, status=status)


def ready_patch(facts: PodFacts, now_wall: float, started_wall: float | None = None) -> PodStatusPatch:
    """The probes passed: the running containers become ready (and started), ContainersReady and Ready True."""
    now = rfc3339(now_wall)
    started = rfc3339(started_wall if started_wall is not None else (facts.run_started_at or now_wall))
    gen = _generation(facts)
    n = facts.restart_count
    statuses = [{**_base(facts, name, image, container_id(facts, name, n), n, i), "ready": True, "started": True,
                 "state": {"running": {"startedAt": started}}}
                for i, (name, image) in enumerate(facts.containers)]
    conditions = [_cond("ContainersReady", "True", now, gen=gen), _cond("Ready", "True", now, gen=gen)]
    for c in conditions:  # strategic merge: null deletes the NotReady reason and message
        c["reason"] = None
        c["message"] = None
    status = PodStatusBody(conditions=conditions, containerStatuses=statuses)
    if gen:
        status["observedGeneration"] = gen
    return PodStatusPatch(metadata={"uid": facts.uid}, status=status)


def terminated_patch(facts: PodFacts, now_wall: float, code: int, started_wall: float | None = None) -> PodStatusPatch:
    """Running (or Pending) -> Succeeded (exit 0) or Failed: every container terminated with ``code``.

    The conditions are the kubelet's for a terminal phase: ContainersReady and Ready False with reason
    ``PodCompleted`` (Succeeded) or ``PodFailed`` (Failed); Initialized stays True, with reason
    ``PodCompleted`` when Succeeded (its transition time is kept).
    """
    now = rfc3339(now_wall)
    started = rfc3339(started_wall if started_wall is not None else (facts.run_started_at or now_wall))
    gen = _generation(facts)
    reason = "Completed" if code == 0 else "Error"
    n = facts.restart_count
    statuses = [{**_base(facts, name, image, container_id(facts, name, n), n, i), "ready": False, "started": False,
                 "state": {"running": None, "waiting": None, "terminated": {
                     "exitCode": code, "reason": reason, "startedAt": started, "finishedAt": now,
                     "containerID": container_id(facts, name, n)}}}
                for i, (name, image) in enumerate(facts.containers)]
    succeeded = code == 0
    why = POD_COMPLETED if succeeded else POD_FAILED
    conditions = [_cond("PodReadyToStartContainers", "False", now, gen=gen),
                  _cond("ContainersReady", "False", now, why, gen),
                  _cond("Ready", "False", now, why, gen)]
    if succeeded:
        conditions.append(_cond("Initialized", "True", None, POD_COMPLETED, gen))
    elif gen:
        conditions.append(_cond("Initialized", "True", None, gen=gen))
    status = PodStatusBody(phase="Succeeded" if succeeded else "Failed", conditions=conditions,
                           containerStatuses=statuses)
    if gen:
        status["observedGeneration"] = gen
    return PodStatusPatch(metadata={"uid": facts.uid}, status=status)


def restarted_patch(facts: PodFacts, now_wall: float, code: int, started_wall: float | None = None) -> PodStatusPatch:
    """restartPolicy OnFailure and a non-zero exit: the containers restart in place (restartCount + 1).

    With a readiness or startup probe the restarted containers are not ready until
    :func:`ready_patch` (ContainersReady and Ready go False meanwhile); without, they are ready at once.
    """
    now = rfc3339(now_wall)
    started = rfc3339(started_wall if started_wall is not None else (facts.run_started_at or now_wall))
    gen = _generation(facts)
    gated = facts.ready_delay is not None
    n = facts.restart_count + 1
    statuses = [{**_base(facts, name, image, container_id(facts, name, n), n, i),
                 "ready": not gated, "started": not facts.has_startup_probe,
                 "lastState": {"terminated": {"exitCode": code, "reason": "Error", "startedAt": started,
                                              "finishedAt": now,
                                              "containerID": container_id(facts, name, n - 1)}},
                 "state": {"running": {"startedAt": now}, "terminated": None, "waiting": None}}
                for i, (name, image) in enumerate(facts.containers)]
    status = PodStatusBody(containerStatuses=statuses)
    if gated:
        message = _unready_message(facts)
        status["conditions"] = [_cond("ContainersReady", "False", now, CONTAINERS_NOT_READY, gen, message),
                                _cond("Ready", "False", now, CONTAINERS_NOT_READY, gen, message)]
    if gen:
        status["observedGeneration"] = gen
    return PodStatusPatch(metadata={"uid": facts.uid}, status=status)


def delete_options(uid: str) -> DeleteOptions:
    """DELETE grace 0 that only removes the pod with this uid (the kubelet's final delete)."""
    return DeleteOptions(apiVersion="v1", kind="DeleteOptions", gracePeriodSeconds=0, preconditions={"uid": uid})


def deletion_exit_code(facts: PodFacts) -> int:
    """Exit code of containers stopped because their pod is being deleted.

    A service (restartPolicy Always) handles SIGTERM and exits 0; a batch container interrupted before
    its run ended is reported as killed by SIGTERM (143), so a Job counts it as failed, not done.
    """
    return 0 if facts.restart_policy == "Always" else 143
