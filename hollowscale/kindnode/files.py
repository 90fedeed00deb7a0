"""What goes on top of the Debian tree to make a kind node: kind's own files, our binaries, and the
changes this machine kind needs.

kind's files (``images/base/files`` of kind's Go module: the entrypoint, the systemd units of containerd
and the kubelet, containerd's config, the kubelet drop-ins, sysctls) are read from the module kind
itself is built from, at the version pinned in :mod:`hollowscale.versions`, with the modes kind's
Dockerfile gives them.  kind's node-image builder would then add kubeadm, kubelet and kubectl and
``/kind/version``; so do we, from our own build of Kubernetes.

Where ours differs from kind's, and why (each is a fact of this machine kind, checked):

- **containerd and runc are Debian's** (1.6.20, 1.1.5), reached at the paths kind's units use through
  symlinks (``/usr/local/bin/containerd`` ...); kind builds newer ones from git, out of reach here.
  Debian's containerd 1.6 reads kind's ``version = 2`` config.
- **No raised limits, no negative OOM score**: kind's containerd unit sets ``Limit*=infinity`` and
  ``OOMScoreAdjust=-999``; both need CAP_SYS_RESOURCE, which the harness does not hold here, so systemd
  would refuse to start containerd.  Our copy of the unit drops those lines.
- **containerd's CRI with ``disable_apparmor`` and ``restrict_oom_score_adj``**: without them runc fails a
  pod sandbox on this kernel ("can't get final child's PID from pipe: EOF"), as for our real nodes.
- **Images are imported at boot** (``hollowscale-import-images.service``, ordered before the kubelet)
  from ``/kind/images/*.tar``, since kind's builder imports them into a running containerd and commits
  the container, a step that needs its docker provider.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterable
from pathlib import Path

from hollowscale.images.layout import Entry, LayoutError

#: the kind node's files as kind's Dockerfile installs them: (folder under images/base/files, mode)
KIND_FILE_MODES = (("usr/local/bin", 0o755), ("kind/bin", 0o755), ("kind", 0o644), ("LICENSES", 0o644),
                   ("etc", 0o644))
#: units kind's Dockerfile enables (``systemctl enable``), plus our image import
ENABLED_UNITS = ("kubelet.service", "containerd.service", "undo-mount-hacks.service",
                 "hollowscale-import-images.service")
#: Debian's binaries at the paths kind's units and scripts use
SYMLINKS = {"usr/local/bin/containerd": "/usr/bin/containerd", "usr/local/bin/ctr": "/usr/bin/ctr",
            "usr/local/bin/containerd-shim-runc-v2": "/usr/bin/containerd-shim-runc-v2",
            "usr/local/sbin/runc": "/usr/sbin/runc",
            **{f"opt/cni/bin/{p}": f"/usr/lib/cni/{p}" for p in ("host-local", "loopback", "ptp", "portmap", "bridge")}}
#: lines of kind's containerd unit that need CAP_SYS_RESOURCE (module docstring)
PRIVILEGED_UNIT_LINES = ("LimitNPROC=", "LimitCORE=", "LimitNOFILE=", "OOMScoreAdjust=")
IMAGES_DIR = "kind/images"

IMPORT_SCRIPT = """#!/bin/sh
# Written by hollowscale.kindnode: import the node's images (/kind/images/*.tar) into containerd once.
set -eu
done_marker=/var/lib/hollowscale/images-imported
[ -f "$done_marker" ] && exit 0
for i in $(seq 1 60); do ctr version >/dev/null 2>&1 && break; sleep 1; done
for tar in /kind/images/*.tar; do
  [ -f "$tar" ] || continue
  # kind may restart containerd for its config patches meanwhile: try each import a few times
  for attempt in 1 2 3 4 5; do
    if ctr --namespace=k8s.io images import --all-platforms --no-unpack "$tar" >/dev/null; then break; fi
    [ "$attempt" = 5 ] && { echo "importing $tar failed" >&2; exit 1; }
    sleep 2
  done
done
mkdir -p "$(dirname "$done_marker")"
touch "$done_marker"
"""

IMPORT_UNIT = """# Written by hollowscale.kindnode: the node's images into containerd before the kubelet starts.
[Unit]
Description=Import the kind node's images into containerd
After=containerd.service
Requires=containerd.service
Before=kubelet.service

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/kind/bin/hollowscale-import-images.sh

[Install]
WantedBy=multi-user.target
"""

#: the kubelet waits for the images (kubeadm restarts it; the dependency pulls the import in first)
KUBELET_DROPIN = """# Written by hollowscale.kindnode.
[Unit]
Requires=hollowscale-import-images.service
After=hollowscale-import-images.service
"""

#: what kindnetd does for kind, as far as a cluster here needs it (kind's kindnetd image is out of reach): on
#: every node, a ptp CNI config over the node's podCIDR, and a route to each other node's podCIDR via its
#: address; pod traffic leaving the pod range is masqueraded.  A DaemonSet on the kube-proxy image (Debian
#: with bash, iproute2, curl and jq, on every node already), reading the nodes with its own ServiceAccount.
CNI_SCRIPT = r"""#!/bin/bash
# hollowscale-cni: a ptp CNI config for this node's podCIDR, routes to the other nodes' podCIDRs
set -u
api="https://${KUBERNETES_SERVICE_HOST}:${KUBERNETES_SERVICE_PORT}"
sa=/var/run/secrets/kubernetes.io/serviceaccount
conf=/host/etc/cni/net.d/10-hollowscale.conflist
while true; do
  nodes=$(curl -sf --cacert "$sa/ca.crt" -H "Authorization: Bearer $(cat "$sa/token")" "$api/api/v1/nodes" |
    jq -r '.items[] | [.metadata.name, (.spec.podCIDR // ""),
           ((.status.addresses // []) | map(select(.type == "InternalIP")) | .[0].address // "")] | @tsv')
  while IFS=$'\t' read -r name cidr ip; do
    [ -n "$cidr" ] || continue
    if [ "$name" = "$NODE_NAME" ]; then
      want=$(printf '{"cniVersion": "1.0.0", "name": "hollowscale", "plugins": [{"type": "ptp", "ipMasq": true, "mtu": 1500, "ipam": {"type": "host-local", "ranges": [[{"subnet": "%s"}]], "routes": [{"dst": "0.0.0.0/0"}]}}, {"type": "portmap", "capabilities": {"portMappings": true}}]}' "$cidr")
      if [ "$(cat "$conf" 2>/dev/null)" != "$want" ]; then
        printf '%s\n' "$want" > "$conf.tmp" && mv "$conf.tmp" "$conf" && echo "wrote $conf for $cidr"
      fi
    elif [ -n "$ip" ] && ! ip route show "$cidr" | grep -qF "via $ip "; then
      ip route replace "$cidr" via "$ip" && echo "route $cidr via $ip ($name)"
    fi
  done <<< "$nodes"
  sleep 5
done
"""


def default_cni_manifest(image: str) -> str:
    """kind's ``/kind/manifests/default-cni.yaml``: the hollowscale-cni DaemonSet (:data:`CNI_SCRIPT`) on ``image``."""
    script = "\n".join("    " + line if line else "" for line in CNI_SCRIPT.splitlines())
    return f"""# Written by hollowscale.kindnode: kind applies it unless networking.disableDefaultCNI is set.
apiVersion: v1
kind: ServiceAccount
metadata: {{name: hollowscale-cni, namespace: kube-system}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {{name: hollowscale-cni}}
rules:
  - {{apiGroups: [""], resources: [nodes], verbs: [list]}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: hollowscale-cni}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: hollowscale-cni}}
subjects:
  - {{kind: ServiceAccount, name: hollowscale-cni, namespace: kube-system}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: hollowscale-cni, namespace: kube-system}}
data:
  cni.sh: |
{script}
---
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: hollowscale-cni
  namespace: kube-system
  labels: {{app: hollowscale-cni}}
spec:
  selector:
    matchLabels: {{app: hollowscale-cni}}
  template:
    metadata:
      labels: {{app: hollowscale-cni}}
    spec:
      hostNetwork: true
      serviceAccountName: hollowscale-cni
      tolerations: [{{operator: Exists}}]
      priorityClassName: system-node-critical
      containers:
        - name: cni
          image: {image}
          imagePullPolicy: IfNotPresent
          command: [/bin/bash, /script/cni.sh]
          env:
            - name: NODE_NAME
              valueFrom: {{fieldRef: {{fieldPath: spec.nodeName}}}}
          securityContext:
            capabilities: {{add: [NET_ADMIN, NET_RAW]}}
          resources:
            requests: {{cpu: 10m, memory: 16Mi}}
          volumeMounts:
            - {{name: cni-conf, mountPath: /host/etc/cni/net.d}}
            - {{name: script, mountPath: /script}}
      volumes:
        - name: cni-conf
          hostPath: {{path: /etc/cni/net.d, type: DirectoryOrCreate}}
        - name: script
          configMap: {{name: hollowscale-cni}}
"""


#: kind applies this on every cluster; the host-path provisioner is what its own fallback uses
DEFAULT_STORAGE = """# Written by hollowscale.kindnode: kind's fallback StorageClass (host paths on the node).
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: standard
  annotations:
    storageclass.kubernetes.io/is-default-class: "true"
provisioner: kubernetes.io/host-path
"""


def kind_files(kind_module_dir: Path) -> list[Entry]:
    """kind's ``images/base/files`` with its Dockerfile's modes (scripts 0755, the rest 0644)."""
    base = kind_module_dir / "images" / "base" / "files"
    if not (base / "usr" / "local" / "bin" / "entrypoint").is_file():
        raise LayoutError(f"{base} has no usr/local/bin/entrypoint: not kind's base image files")
    entries: list[Entry] = []
    for path in sorted(p for p in base.rglob("*") if p.is_file()):
        rel = path.relative_to(base).as_posix()
        mode = next(m for prefix, m in KIND_FILE_MODES if rel.startswith(prefix + "/"))
        if rel == "etc/containerd/config.toml":
            entries.append(Entry(rel, "file", mode, data=containerd_config(path.read_text()).encode()))
        elif rel == "etc/systemd/system/containerd.service":
            entries.append(Entry(rel, "file", mode, data=unprivileged_unit(path.read_text()).encode()))
        else:
            entries.append(Entry(rel, "file", mode, source=path))
    return entries


def containerd_config(kind_config: str) -> str:
    """kind's containerd config with the two CRI settings this kernel needs (module docstring)."""
    marker = '[plugins."io.containerd.grpc.v1.cri"]\n'
    if marker not in kind_config or "restrict_oom_score_adj = false" not in kind_config:
        raise LayoutError("kind's etc/containerd/config.toml no longer has the CRI section this build edits")
    text = kind_config.replace("restrict_oom_score_adj = false", "restrict_oom_score_adj = true")
    return text.replace(marker, marker + "  # hollowscale: runc cannot start a sandbox on this kernel without it\n"
                                          "  disable_apparmor = true\n", 1)


def unprivileged_unit(unit: str) -> str:
    """A unit without the settings that need CAP_SYS_RESOURCE (module docstring)."""
    kept = [line for line in unit.splitlines() if not line.startswith(PRIVILEGED_UNIT_LINES)]
    return "\n".join(kept) + "\n# hollowscale: Limit*=infinity and OOMScoreAdjust dropped (no CAP_SYS_RESOURCE)\n"


def cri_base_spec(ctr: str = "/usr/bin/ctr") -> bytes:
    """``/etc/containerd/cri-base.json`` as kind makes it: containerd's default OCI spec (``ctr oci spec``, the
    same containerd as the node's) with kind's createContainer hook and without rlimits."""
    if not os.access(ctr, os.X_OK):
        raise LayoutError(f"{ctr} not found: install Debian's containerd (`make setup` installs it)")
    proc = subprocess.run([ctr, "oci", "spec"], capture_output=True, text=True, timeout=60, check=False)
    if proc.returncode != 0:
        raise LayoutError(f"`ctr oci spec` failed: {proc.stderr.strip()[-300:]}")
    spec = json.loads(proc.stdout)
    hooks = spec.setdefault("hooks", {}).setdefault("createContainer", [])
    hooks.append({"path": "/kind/bin/mount-product-files.sh"})
    spec.get("process", {}).pop("rlimits", None)
    return (json.dumps(spec, indent=2) + "\n").encode()


def node_entries(kind_module_dir: Path, binaries: dict[str, Path], kubernetes_version: str,
                 images: Iterable[tuple[str, Path]], cni_image: str, ctr: str = "/usr/bin/ctr") -> list[Entry]:
    """Everything above the Debian tree: kind's files, ``binaries`` (name -> path) in ``/usr/bin``,
    ``/kind/version``, the image archives (file name, path) under ``/kind/images``, our units, the
    CNI kind applies (on ``cni_image``), the symlinks to Debian's containerd, runc and CNI plugins, and
    the units kind enables."""
    entries = kind_files(kind_module_dir)
    entries += [Entry(f"usr/bin/{name}", "file", 0o755, source=path) for name, path in sorted(binaries.items())]
    entries += [
        Entry("kind/version", "file", 0o644, data=f"{kubernetes_version}\n".encode()),
        Entry("etc/containerd/cri-base.json", "file", 0o644, data=cri_base_spec(ctr)),
        Entry("kind/bin/hollowscale-import-images.sh", "file", 0o755, data=IMPORT_SCRIPT.encode()),
        Entry("etc/systemd/system/hollowscale-import-images.service", "file", 0o644, data=IMPORT_UNIT.encode()),
        Entry("etc/systemd/system/kubelet.service.d/20-hollowscale-images.conf", "file", 0o644,
              data=KUBELET_DROPIN.encode()),
        Entry("kind/manifests/default-storage.yaml", "file", 0o644, data=DEFAULT_STORAGE.encode()),
        Entry("kind/manifests/default-cni.yaml", "file", 0o644, data=default_cni_manifest(cni_image).encode()),
        Entry("etc/kubernetes/manifests", "dir", 0o755),
        Entry("etc/sysctl.d/20-hollowscale-forward.conf", "file", 0o644, data=b"net.ipv4.ip_forward = 1\n"),
    ]
    entries += [Entry(f"{IMAGES_DIR}/{name}", "file", 0o644, source=path) for name, path in images]
    entries += [Entry(path, "symlink", 0o777, target=target) for path, target in SYMLINKS.items()]
    entries += [Entry(f"etc/systemd/system/multi-user.target.wants/{unit}", "symlink", 0o777,
                      target=f"/etc/systemd/system/{unit}") for unit in ENABLED_UNITS]
    return entries


__all__ = ["CNI_SCRIPT", "ENABLED_UNITS", "IMAGES_DIR", "SYMLINKS", "containerd_config", "cri_base_spec",
           "default_cni_manifest", "kind_files",
           "node_entries", "unprivileged_unit"]
