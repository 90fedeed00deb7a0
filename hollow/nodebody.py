"""Node and Lease bodies, as pure functions of a node slot and the time.

A node is created *with* its status (capacity, allocatable, Ready and pressure conditions, addresses,
nodeInfo, daemonEndpoints), as the kubelet registers itself, so it is schedulable the moment it exists.
Later heartbeats only move ``lastHeartbeatTime``; ``lastTransitionTime`` stays at the moment the node
last became Ready, so the condition never looks like it flapped.
"""

from __future__ import annotations

from dataclasses import dataclass

from hollow.bodies import LeaseBody, LeaseRenewPatch, NodeBody, NodeCondition, NodeStatus, NodeStatusPatch
from hollow.clock import rfc3339, rfc3339_micro
from hollow.pools import UNHEALTHY_TAINT
from hollow.sharding import NodeSlot

NODE_LABEL = "hollowscale.io/hollow"
POOL_LABEL = "hollowscale.io/pool"
RACK_LABEL = "hollowscale.io/rack"
ROLE_LABEL = "hollowscale.io/role"
LEASE_NAMESPACE = "kube-node-lease"
#: the Ready condition's reason on the nodes ``topology.unhealthy.not_ready`` keeps NotReady
NOT_READY_REASON = "HollowscaleNotReady"


@dataclass(frozen=True)
class NodeIdentity:
    """What ``nodeInfo`` reports (fake but well-formed).

    Attributes:
        kubelet_version: reported kubelet version string.
        os_image: reported OS image.
        kernel_version: reported kernel.
        container_runtime: reported runtime and version.
    """

    kubelet_version: str = "v1.36.3-hollow"
    os_image: str = "hollowscale hollow node"
    kernel_version: str = "6.1.0-hollow"
    container_runtime: str = "hollow://0.1.0"


_CONDITIONS = (
    ("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
    ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    ("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
)
_NOT_READY = ("Ready", "False", NOT_READY_REASON, "hollowscale keeps this node NotReady (topology.unhealthy)")


def node_labels(slot: NodeSlot) -> dict[str, str]:
    """Well-known labels, topology (zones and racks, or the levels and NVLink domain of
    :meth:`hollow.pools.PoolSpec.topology_labels`), pool and role labels, then the pool's own labels
    (which win; validation refuses those that would overwrite a topology level)."""
    pool = slot.pool
    labels = {
        "kubernetes.io/hostname": slot.name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "beta.kubernetes.io/arch": "amd64",
        "type": "hollow",
        NODE_LABEL: "true",
        POOL_LABEL: pool.name,
    }
    if pool.topology.region:
        labels["topology.kubernetes.io/region"] = pool.topology.region
    if slot.zone:
        labels["topology.kubernetes.io/zone"] = slot.zone
    if slot.rack:
        labels[RACK_LABEL] = slot.rack
    if pool.topology.levels or pool.topology.shape:
        labels.update(pool.topology_labels(slot.index))
    if pool.role:
        labels[f"node-role.kubernetes.io/{pool.role}"] = ""
        labels[ROLE_LABEL] = pool.role
    labels.update(pool.labels)
    return labels


def conditions(now_wall: float, transition: float | None, ready: bool = True) -> list[NodeCondition]:
    """The four kubelet conditions with heartbeat ``now_wall``.

    ``transition`` sets ``lastTransitionTime``; None leaves it out, so a strategic merge (key ``type``)
    keeps the time already stored: a heartbeat or a re-adoption does not look like a Ready flap.
    ``ready`` False: Ready is False with reason :data:`NOT_READY_REASON` (a node kept NotReady).
    """
    hb = rfc3339(now_wall)
    out = []
    for t, s, r, m in _CONDITIONS if ready else (*_CONDITIONS[:-1], _NOT_READY):
        c = NodeCondition(type=t, status=s, reason=r, message=m, lastHeartbeatTime=hb)
        if transition is not None:
            c["lastTransitionTime"] = rfc3339(transition)
        out.append(c)
    return out


def node_status(slot: NodeSlot, now_wall: float, ready_since: float | None, identity: NodeIdentity) -> NodeStatus:
    """The full status a kubelet would post."""
    pool = slot.pool
    machine = f"{slot.ordinal:032x}"
    return NodeStatus(
        capacity=pool.node_capacity,
        allocatable=pool.node_allocatable,
        conditions=conditions(now_wall, ready_since, not slot.not_ready),
        addresses=[{"type": "InternalIP", "address": slot.internal_ip}, {"type": "Hostname", "address": slot.name}],
        daemonEndpoints={"kubeletEndpoint": {"Port": 10250}},
        nodeInfo={
            "machineID": machine,
            "systemUUID": f"{machine[:8]}-{machine[8:12]}-{machine[12:16]}-{machine[16:20]}-{machine[20:]}",
            "bootID": machine,
            "kernelVersion": identity.kernel_version,
            "osImage": identity.os_image,
            "containerRuntimeVersion": identity.container_runtime,
            "kubeletVersion": identity.kubelet_version,
            "kubeProxyVersion": "",
            "operatingSystem": "linux",
            "architecture": "amd64",
        },
    )


def node_body(slot: NodeSlot, now_wall: float, identity: NodeIdentity) -> NodeBody:
    """The Node to POST: metadata, spec (pod CIDR, taints, providerID) and full status."""
    pool = slot.pool
    spec: dict[str, object] = {"podCIDR": slot.pod_cidr, "podCIDRs": [slot.pod_cidr],
                               "providerID": f"hollow://{slot.name}"}
    taints = [{"key": t.key, "value": t.value, "effect": t.effect} if t.value
              else {"key": t.key, "effect": t.effect} for t in pool.taints]
    if slot.tainted:
        key, value, effect = UNHEALTHY_TAINT
        taints.append({"key": key, "value": value, "effect": effect})
    if taints:
        spec["taints"] = taints
    return NodeBody(
        apiVersion="v1",
        kind="Node",
        metadata={"name": slot.name, "labels": node_labels(slot),
                  "annotations": {"node.alpha.kubernetes.io/ttl": "0", **pool.annotations}},
        spec=spec,
        status=node_status(slot, now_wall, now_wall, identity),
    )


def heartbeat_patch(now_wall: float, ready_since: float | None = None, ready: bool = True) -> NodeStatusPatch:
    """Strategic merge patch of ``nodes/NAME/status`` that refreshes the conditions (merge key ``type``).

    ``ready_since`` only when the node comes back from NotReady (the transition happens now);
    ``ready`` False for a node kept NotReady (see :func:`conditions`).
    """
    return NodeStatusPatch(status=NodeStatus(conditions=conditions(now_wall, ready_since, ready)))


def adopt_patch(slot: NodeSlot, now_wall: float, identity: NodeIdentity) -> NodeStatusPatch:
    """Status patch for a node that already exists (agent restart): full status, transition time kept."""
    return NodeStatusPatch(status=node_status(slot, now_wall, None, identity))


def lease_body(name: str, node_uid: str, duration_s: int, now_wall: float) -> LeaseBody:
    """The node's Lease, owned by the Node (garbage-collected with it), as the kubelet makes it."""
    return LeaseBody(
        apiVersion="coordination.k8s.io/v1",
        kind="Lease",
        metadata={"name": name, "namespace": LEASE_NAMESPACE,
                  "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": name, "uid": node_uid}]},
        spec={"holderIdentity": name, "leaseDurationSeconds": duration_s, "renewTime": rfc3339_micro(now_wall)},
    )


def lease_update_bytes(name: str, node_uid: str, duration_s: int, resource_version: str, now_wall: float) -> bytes:
    """The whole Lease for an update (PUT) at ``resource_version``, with ``renewTime`` now, pre-encoded.

    The kubelet renews by update, not patch, and so does the agent (the apiserver's CPU per renewal
    was the same within noise for both, ~2.3 ms on v1.36.3 on the 2-core machine).  An update replaces
    the object, so it carries everything :func:`lease_body` set (owner included).
    """
    return (b'{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"%s","namespace":"%s",'
            b'"resourceVersion":"%s","ownerReferences":[{"apiVersion":"v1","kind":"Node","name":"%s","uid":"%s"}]},'
            b'"spec":{"holderIdentity":"%s","leaseDurationSeconds":%d,"renewTime":"%s"}}') % (
        name.encode(), LEASE_NAMESPACE.encode(), resource_version.encode(), name.encode(), node_uid.encode(),
        name.encode(), duration_s, rfc3339_micro(now_wall).encode())


def lease_renew_patch(now_wall: float) -> LeaseRenewPatch:
    """Merge patch that moves ``spec.renewTime`` (the only field a renewal changes)."""
    return LeaseRenewPatch(spec={"renewTime": rfc3339_micro(now_wall)})


def lease_renew_bytes(now_wall: float) -> bytes:
    """:func:`lease_renew_patch` pre-encoded (the hottest body of the agent: ~1,000/s at 10k nodes)."""
    return b'{"spec":{"renewTime":"' + rfc3339_micro(now_wall).encode() + b'"}}'

