"""The resource fields of a pod status, as the kubelet (v1.36) derives them from the spec.

Container level (``containerStatuses[].resources`` / ``allocatedResources``): the kubelet reports the
container's allocated resources, which for a pod that was never resized are its spec ``resources``
and spec ``requests`` (``convertToAPIContainerStatuses``).  The scheduler reads both when it sums a
pod's requests (``resourcehelper.PodRequests`` with ``UseStatusResources``: the max of spec, status
and allocated), so they are written; the objects are the spec's own (no copy, no parsing).

Pod level (``status.resources`` / ``status.allocatedResources``): the pod's aggregate requests and
limits by the sidecar formula (``AggregateContainerRequests``: app containers and sidecars summed,
the max with each run-to-completion init container plus the sidecars started before it), with
pod-level ``spec.resources`` taking precedence.  A Running pod on a real kubelet reports what its
cgroups hold there; a hollow pod has none, so it reports the aggregate (what a real kubelet reports
for a pod that is not running).  One container and no pod-level resources, the common case, needs
no arithmetic: the container's own maps are the aggregate.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from hollow.stages import PodFacts
from kubecore.quantity import format_quantity, parse_quantity

#: resources whose quantities are bytes (formatted with binary suffixes when exact)
_BYTES = ("memory", "ephemeral-storage", "hugepages-")


def container_resource_fields(resources: dict[str, Any] | None) -> dict[str, Any]:
    """``resources`` and ``allocatedResources`` of one container status (the spec's own objects)."""
    out: dict[str, Any] = {"resources": resources or {}}
    requests = (resources or {}).get("requests")
    if requests:
        out["allocatedResources"] = requests
    return out


def _format(name: str, value: Fraction) -> str:
    try:
        return format_quantity(value, binary=name.startswith(_BYTES))
    except ValueError:  # finer than milli: keep the exact value in nano units
        return f"{int(value * 10**9)}n"


def _add(into: dict[str, Fraction], items: dict[str, Any] | None) -> None:
    for name, raw in (items or {}).items():
        into[name] = into.get(name, Fraction(0)) + parse_quantity(raw)


def _max(into: dict[str, Fraction], other: dict[str, Fraction]) -> None:
    for name, value in other.items():
        if value > into.get(name, Fraction(0)):
            into[name] = value


def _aggregate(facts: PodFacts, key: str) -> dict[str, Any]:
    """Sum of ``key`` (requests or limits) over the pod by the sidecar formula, as quantity strings."""
    total: dict[str, Fraction] = {}
    for res in facts.resources:
        _add(total, (res or {}).get(key))
    sidecars: dict[str, Fraction] = {}
    inits: dict[str, Fraction] = {}
    for (_, _, policy), res in zip(facts.init_containers, facts.init_resources, strict=False):
        mine: dict[str, Fraction] = {}
        _add(mine, (res or {}).get(key))
        if policy == "Always":
            _add(total, (res or {}).get(key))
            _add(sidecars, (res or {}).get(key))
            _max(inits, dict(sidecars))
        else:
            for name, value in sidecars.items():
                mine[name] = mine.get(name, Fraction(0)) + value
            _max(inits, mine)
    _max(total, inits)
    out = {name: _format(name, value) for name, value in total.items()}
    pod_level = (facts.pod_resources or {}).get(key)
    if pod_level:
        out.update(pod_level)
    return out


def pod_resource_fields(facts: PodFacts) -> dict[str, Any]:
    """``status.resources`` and ``status.allocatedResources`` (empty parts left out, as the kubelet's JSON does).

    Returns {} when a quantity cannot be read (the apiserver validated them, so only a form this
    parser does not know): the fields are then left out rather than wrong.
    """
    if len(facts.resources) == 1 and not facts.init_containers and not facts.pod_resources:
        res = facts.resources[0] or {}
        requests, limits = res.get("requests"), res.get("limits")
    else:
        try:
            requests, limits = _aggregate(facts, "requests"), _aggregate(facts, "limits")
        except ValueError:
            return {}
    resources = {}
    if requests:
        resources["requests"] = requests
    if limits:
        resources["limits"] = limits
    out: dict[str, Any] = {"resources": resources}
    if requests:
        out["allocatedResources"] = requests
    return out
