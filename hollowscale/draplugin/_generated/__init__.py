"""GENERATED gRPC/protobuf code for the kubelet's DRA plugin API (``dra/v1`` and ``dra/v1beta1``: the
``DRAPlugin`` service with NodePrepareResources and NodeUnprepareResources).

Do not edit: regenerate with ``bash hollowscale/draplugin/_generated/regenerate.sh`` (it says which
grpcio-tools to install).  The protos are the kubelet's own (k8s.io/kubelet@v0.36.3), copied beside the code,
committed for the reasons :mod:`hollowscale.deviceplugin._generated` gives; the registration (plugin watcher)
and pod-resources stubs the plugin also uses are that package's, not copies (one proto file per package in
protobuf's descriptor pool).
"""
