"""GENERATED gRPC/protobuf code for the kubelet's device-plugin API (v1beta1), plugin-registration API (v1) and
pod-resources API (v1: which devices the kubelet gave each container; the tests read it).

Do not edit: regenerate with ``bash hollowscale/deviceplugin/_generated/regenerate.sh`` (it says which
grpcio-tools to install).  The protos are the kubelet's own (k8s.io/kubelet@v0.36.3), copied beside the
code.  The generated files are committed rather than generated at setup because the plugin runs on every
real GPU node started by ``cluster up --real-nodes``: generating at setup would add grpcio-tools (a protoc
build) and the Go module cache to the core install for two files that change only when the kubelet's API
does.  The generated code requires grpcio >= 1.85.1 and protobuf 7.x >= 7.35.1 at run time
(pyproject.toml says so).
"""
