"""The one place that pins the control plane's versions.

Everything that builds, caches or reports component versions reads these constants, so a bump is a
one-line change here (the build cache is keyed by them, so a bump rebuilds once).
"""

from __future__ import annotations

#: Kubernetes release whose kube-apiserver, kube-controller-manager, kube-scheduler and kubectl we build.
KUBERNETES_VERSION = "v1.36.3"
#: Version of the ``k8s.io/*`` staging modules matching :data:`KUBERNETES_VERSION` (v1.X.Y -> v0.X.Y).
STAGING_VERSION = "v0." + KUBERNETES_VERSION.removeprefix("v1.")
#: etcd server release (``go.etcd.io/etcd/server/v3``).
ETCD_VERSION = "v3.6.16"
#: KWOK release, built only for the hollow-node benchmark (``sigs.k8s.io/kwok``).
KWOK_VERSION = "v0.7.0"
#: Kueue release run as one more local component (``sigs.k8s.io/kueue/cmd/kueue``), with its CRDs and
#: webhook manifests read from the same module in the Go module cache.
KUEUE_VERSION = "v0.17.0"
