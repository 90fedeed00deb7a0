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
#: kind, built from its module for a cluster of kind nodes (issue 26); its node image is ours (hollowscale.kindimage)
KIND_VERSION = "v0.33.0"
#: CoreDNS for a kind node image: kubeadm v1.36.3 asks for v1.14.2, which the module proxy does not serve;
#: v1.14.3 is the nearest served release (a patch release of the same minor)
COREDNS_VERSION = "v1.14.3"
