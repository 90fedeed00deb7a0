"""A kubelet device plugin for ``nvidia.com/gpu``: real nodes advertise GPUs, fake or real, and containers get
exactly the devices the kubelet allocated to them.

Run one per real node (``python -m hollowscale.deviceplugin --kubelet-root DIR --node NAME --fake-gpus N``,
see :mod:`~hollowscale.deviceplugin.cli`).  How it reaches the kubelet (verified in the v1.36.3 kubelet
source, details in :mod:`~hollowscale.deviceplugin.server`): through that kubelet's plugin watcher, with one
unix socket ``<kubelet-root>/plugins_registry/nvidia.com_gpu.sock`` serving both the
``pluginregistration.Registration`` service (``GetInfo`` answers type ``DevicePlugin``, name
``nvidia.com/gpu``, endpoint = that socket's path, versions ``[v1beta1]``) and the ``v1beta1.DevicePlugin``
service the device manager then dials at the endpoint.  The legacy registration socket
``/var/lib/kubelet/device-plugins/kubelet.sock`` is hard-coded in the kubelet and shared by every kubelet
on this machine, so it is not used.

Modules: :mod:`~hollowscale.deviceplugin.inventory` (which GPUs, their IDs), :mod:`~hollowscale.deviceplugin.
allocation` (what Allocate hands a container), :mod:`~hollowscale.deviceplugin.health` (health file,
nvidia-smi probe), :mod:`~hollowscale.deviceplugin.server` (the gRPC services), ``_generated`` (stubs from
the kubelet's protos).
"""
