"""The node's ResourceSlices as the plugin publishes them, and when a published one needs an update (pure).

The slices are :mod:`hollow.dra`'s (:meth:`hollowscale.draplugin.inventory.DraInventory.slices`): named
``<node>-gpu.nvidia.com`` (``-<k>`` when a pool needs several), pool = the node's name, ``nodeName`` set
(the node authorizer lets a node's own credentials write exactly such slices), owned by the Node (the
garbage collector removes them with the node), plus the label :data:`LABELS` saying who publishes them.
"""

from __future__ import annotations

from typing import Any

from hollowscale.draplugin.inventory import DraInventory
from kubecore.quantity import parse_quantity

LABELS = {"app.kubernetes.io/managed-by": "hollowscale-draplugin"}
_QUANTITY_KEYS = frozenset({"value", "default", "min", "max", "step"})


def wanted_slices(inventory: DraInventory, node: str, node_uid: str) -> list[dict[str, Any]]:
    """The slices ``node`` should have published."""
    return inventory.slices(node, node_uid, LABELS)


def _quantities(obj: Any) -> Any:
    """``obj`` with every quantity (capacity values, request-policy bounds, counters) turned into a number."""
    if isinstance(obj, dict):
        return {k: (parse_quantity(v) if k in _QUANTITY_KEYS and isinstance(v, str) else _quantities(v))
                for k, v in obj.items()}
    if isinstance(obj, list):
        return [_quantities(v) for v in obj]
    return obj


def same_content(published: dict[str, Any], wanted: dict[str, Any]) -> bool:
    """True when the published slice says what ``wanted`` says: spec without the pool's generation, owner,
    labels.  Quantities are compared by value: the apiserver returns each in its canonical form."""
    def core(obj: dict[str, Any]) -> dict[str, Any]:
        spec = _quantities(dict(obj.get("spec") or {}))
        spec["pool"] = {k: v for k, v in (spec.get("pool") or {}).items() if k != "generation"}
        meta = obj.get("metadata") or {}
        owners = [{k: o.get(k) for k in ("kind", "name", "uid")} for o in meta.get("ownerReferences") or []]
        return {"spec": spec, "owners": owners, "labels": meta.get("labels") or {}}

    return core(published) == core(wanted)
