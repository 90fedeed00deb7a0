"""A kubelet DRA plugin for GPUs (driver ``gpu.nvidia.com``): real nodes publish their GPUs, fake or real, as
ResourceSlice devices, and a pod's containers get the devices its ResourceClaims were allocated.

Run one per real node (``python -m hollowscale.draplugin --kubelet-root DIR --node NAME --kubeconfig FILE
--fake-gpus N``, see :mod:`~hollowscale.draplugin.cli`; ``cluster up --real-nodes N --dra-gpus K`` starts it
as ``hs-real-<i>-draplugin``).  The device plugin (:mod:`hollowscale.deviceplugin`) is its model and lends it
the GPU inventory, what a GPU puts into a container, and the kubelet's registration and pod-resources stubs.

How it works with the kubelet (v1.36.3, details in :mod:`~hollowscale.draplugin.server`): it registers
through the kubelet's plugin watcher (``<root>/plugins_registry/<driver>-reg.sock``), serves the ``dra/v1``
(and ``v1beta1``) ``DRAPlugin`` service on ``<root>/plugins/<driver>/dra.sock``, and once registered keeps
the node's ResourceSlice published (:mod:`~hollowscale.draplugin.publisher`; the kubelet deletes its node's
slices at start and a driver's when it unregisters).  NodePrepareResources reads each claim, checks its
allocation is this node's, writes a CDI spec per claim and answers the CDI device IDs
(:mod:`~hollowscale.draplugin.prepare`); prepared claims are checkpointed (:mod:`~hollowscale.draplugin.
checkpoint`), so retries and restarts get the same answer.

CDI on these nodes: their containerd (Debian's 1.6.20) has no CDI support, so a real node with DRA GPUs
runs runc through :mod:`~hollowscale.draplugin.runtime`, which applies each container's CDI devices (as the
kubelet's pod-resources API lists them) before runc creates it.  With a fake inventory a device is its
variables (``NVIDIA_VISIBLE_DEVICES=<uuid>``, ``HOLLOWSCALE_GPU_IDS``, ``HOLLOWSCALE_DRA_CLAIM``); a real GPU
adds its device files and the driver's libraries.

Modules: :mod:`~hollowscale.draplugin.devices` (what a GPU device is on the API: driver, DeviceClass,
attributes, capacity), :mod:`~hollowscale.draplugin.inventory`, :mod:`~hollowscale.draplugin.slices`,
:mod:`~hollowscale.draplugin.prepare`, :mod:`~hollowscale.draplugin.cdi`, :mod:`~hollowscale.draplugin.
checkpoint`, :mod:`~hollowscale.draplugin.api`, :mod:`~hollowscale.draplugin.publisher`,
:mod:`~hollowscale.draplugin.server`, :mod:`~hollowscale.draplugin.runtime`, ``_generated`` (stubs from the
kubelet's DRA protos).
"""
