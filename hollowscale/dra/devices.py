"""The DRA device names and rendering, re-exported from their one definition, :mod:`hollow.dra`.

Driver ``gpu.nvidia.com``, attribute and capacity names, the DeviceClasses ``gpu.nvidia.com`` (with
``extendedResourceName: nvidia.com/gpu``) and ``mig.nvidia.com``, the GPU catalogue, a pool's ``gpus:``
spec and the ResourceSlices of a node.  Used by the hollow agent (slices of hollow nodes), by this room
(DeviceClasses, validation, figures) and by the real nodes' DRA kubelet plugin,
:mod:`hollowscale.draplugin`, which publishes the same slices for a real node: that plugin sits on a
floor below this room, so it imports the same names from :mod:`hollow.dra` directly.  Change a name
there, never here.
"""

from hollow.dra import *  # noqa: F403  (the re-export is the point)
from hollow.dra import __all__ as __all__
