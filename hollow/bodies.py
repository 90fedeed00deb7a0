"""TypedDicts for the raw JSON bodies the agent writes (only the fields it sets).

They document the wire format and let mypy catch a misspelt key; at runtime they are plain dicts that
go straight to orjson.
"""

from __future__ import annotations

from typing import Any, TypedDict


class ObjectMeta(TypedDict, total=False):
    name: str
    namespace: str
    uid: str
    labels: dict[str, str]
    annotations: dict[str, str]
    ownerReferences: list[dict[str, Any]]


class NodeCondition(TypedDict, total=False):
    type: str
    status: str
    reason: str
    message: str
    lastHeartbeatTime: str
    lastTransitionTime: str  # left out of heartbeats so the stored transition time is kept


class NodeStatus(TypedDict, total=False):
    capacity: dict[str, str]
    allocatable: dict[str, str]
    conditions: list[NodeCondition]
    addresses: list[dict[str, str]]
    daemonEndpoints: dict[str, dict[str, int]]
    nodeInfo: dict[str, str]
    phase: str


class NodeBody(TypedDict):
    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: dict[str, Any]
    status: NodeStatus


class NodeStatusPatch(TypedDict):
    status: NodeStatus


class LeaseSpec(TypedDict, total=False):
    holderIdentity: str
    leaseDurationSeconds: int
    renewTime: str


class LeaseBody(TypedDict):
    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: LeaseSpec


class LeaseRenewPatch(TypedDict):
    spec: LeaseSpec


class PodCondition(TypedDict, total=False):
    type: str
    status: str
    reason: str | None  # None: strategic merge deletes it
    message: str | None
    lastProbeTime: None
    lastTransitionTime: str
    observedGeneration: int


class PodStatusBody(TypedDict, total=False):
    phase: str
    startTime: str
    hostIP: str
    hostIPs: list[dict[str, str]]
    podIP: str
    podIPs: list[dict[str, str]]
    conditions: list[PodCondition]
    containerStatuses: list[dict[str, Any]]
    initContainerStatuses: list[dict[str, Any]]
    reason: str
    message: str
    observedGeneration: int
    resources: dict[str, Any]
    allocatedResources: dict[str, Any]


class PodStatusPatch(TypedDict):
    """Strategic merge patch of ``pods/NAME/status``; ``metadata.uid`` is the precondition."""

    metadata: ObjectMeta
    status: PodStatusBody


class DeleteOptions(TypedDict):
    apiVersion: str
    kind: str
    gracePeriodSeconds: int
    preconditions: dict[str, str]
