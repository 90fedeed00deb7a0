"""Kueue's command line, run in a private mount namespace whose ``/etc`` holds its metrics certificate
(why: :mod:`hollowscale.cluster.kueue`)."""

from __future__ import annotations

import shutil
from pathlib import Path

from hollowscale.cluster.kueue import FEATURE_GATES, KueueError, KueueLayout


def argv(binary: Path, layout: KueueLayout) -> list[str]:
    """Kueue's own argv: its Configuration (:func:`hollowscale.cluster.kueue.render_config`), its
    kubeconfig (user ``kueue``), the feature gates it needs out of a cluster, info logs."""
    return [str(binary), f"--config={layout.config}", f"--kubeconfig={layout.kubeconfig}",
            f"--feature-gates={FEATURE_GATES}", "--zap-log-level=info"]


#: run in Kueue's private mount namespace before exec: a tmpfs for the overlay's upper and work dirs,
#: the metrics certificate copied to upper/kueue/metrics/certs, the overlay on /etc, mounts that were
#: below /etc bound again from a recursive bind of the original /etc, then exec Kueue.
_NAMESPACE_SCRIPT = r"""set -eu
mnt=$1 certs=$2; shift 2
mount -t tmpfs -o size=4m,mode=0700 hollowscale-kueue "$mnt"
mkdir -p "$mnt/upper/kueue/metrics/certs" "$mnt/work" "$mnt/etc"
cp "$certs/tls.crt" "$certs/tls.key" "$mnt/upper/kueue/metrics/certs/"
below=$(awk '$5 ~ "^/etc/" {print $5}' /proc/self/mountinfo)
[ -z "$below" ] || mount --rbind /etc "$mnt/etc"
mount -t overlay hollowscale-kueue-etc -o "lowerdir=/etc,upperdir=$mnt/upper,workdir=$mnt/work" /etc
for m in $below; do mount --bind "$mnt/etc/${m#/etc/}" "$m"; done
exec "$@"
"""


def namespaced_argv(argv: list[str], layout: KueueLayout) -> list[str]:
    """``argv`` run in a private mount namespace whose ``/etc`` has Kueue's metrics certificate.

    The pid stays the same through ``unshare``, ``sh`` and Kueue (each execs the next), so the
    supervisor stops and restarts Kueue itself; the namespace and its mounts end with that process.
    """
    for path in (layout.mount_dir, layout.metrics_certs):
        if any(c in str(path) for c in ",:\n "):
            raise KueueError(f"the cluster dir {layout.root.parent} has a ',', ':' or space in its path, which an "
                             "overlay mount option cannot carry; pick another --dir")
    unshare = shutil.which("unshare") or "/usr/bin/unshare"
    return [unshare, "--mount", "--propagation", "private", "--", "/bin/sh", "-c", _NAMESPACE_SCRIPT,
            "kueue-mount-namespace", str(layout.mount_dir), str(layout.metrics_certs), *argv]
