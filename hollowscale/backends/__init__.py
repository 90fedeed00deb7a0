"""The cluster a run uses: one interface (:class:`.base.ClusterBackend`), one module per backend.

``cluster.backend`` picks the entry of :data:`BACKENDS`; a new backend is a module with a class built
from :class:`.base.BackendSettings` and an entry here (and its name in
:data:`hollowscale.scenario.model.BACKENDS`, which validation reads).
"""

from __future__ import annotations

from collections.abc import Callable

from hollowscale.backends.base import BackendSettings, ClusterAccess, ClusterBackend, ClusterFacts, ControlPlane
from hollowscale.backends.existing import ExistingBackend
from hollowscale.backends.kind import KindBackend
from hollowscale.backends.local import LocalBackend

#: ``cluster.backend`` -> the backend's class
BACKENDS: dict[str, Callable[[BackendSettings], ClusterBackend]] = {
    "local": LocalBackend,
    "kind": KindBackend,
    "existing": ExistingBackend,
}


def backend_for(settings: BackendSettings) -> ClusterBackend:
    """The backend the scenario's ``cluster.backend`` names."""
    return BACKENDS[settings.scenario.cluster.backend](settings)


__all__ = ["BACKENDS", "BackendSettings", "ClusterAccess", "ClusterBackend", "ClusterFacts", "ControlPlane",
           "backend_for"]
