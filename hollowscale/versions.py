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
#: JobSet release run as one more local component (``sigs.k8s.io/jobset``, its root package), with its CRD, RBAC and
#: webhook manifests read from the same module in the Go module cache
JOBSET_VERSION = "v0.12.0"
#: kind, built from its module for a cluster of kind nodes (issue 26); its node image is ours (hollowscale.kindimage)
KIND_VERSION = "v0.33.0"
#: CoreDNS for a kind node image: kubeadm v1.36.3 asks for v1.14.2, which the module proxy does not serve;
#: v1.14.3 is the nearest served release (a patch release of the same minor)
COREDNS_VERSION = "v1.14.3"
#: Go toolchain that setup fetches when no Go >= 1.26 is on the machine (:mod:`hollowscale.gotoolchain`): the module
#: ``golang.org/toolchain`` at ``v0.0.1-<GO_TOOLCHAIN_VERSION>.<GO_TOOLCHAIN_PLATFORM>`` from the Go module proxy, the
#: artifact the go command's own ``GOTOOLCHAIN`` switch downloads
GO_TOOLCHAIN_VERSION = "go1.26.8"
#: the one platform pinned: another machine architecture brings its own Go >= 1.26 (no hash is guessed)
GO_TOOLCHAIN_PLATFORM = "linux-amd64"
#: SHA-256 of that module's zip as the proxy serves it (71,680,185 bytes)
GO_TOOLCHAIN_SHA256 = "30c2b1bf7dcc88d3eb0a1364e47ddd9128edb3110a30e8a0ef61cd5856b31de7"
#: the same zip's go.sum hash (``h1:``, Go's dirhash of its files), as the checksum database sum.golang.org records it
GO_TOOLCHAIN_H1 = "h1:ZOmGe1OnfREDMIdb1Qi4G9JSuDPBLGExZMQ4nis1RXM="
