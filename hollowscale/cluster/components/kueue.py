"""Kueue's command line, run in a private mount namespace whose ``/etc`` holds its metrics certificate
(why: :mod:`hollowscale.cluster.kueue`), and Kueue as the local cluster's installed component (:class:`KueueComponent`:
its install's documents and steps from :mod:`hollowscale.cluster.kueue`, this command line)."""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from hollowscale.cluster.installed import BuiltComponent, write_credentials
from hollowscale.cluster.kubectl import Kubectl
from hollowscale.cluster.kueue import (
    FEATURE_GATES,
    PORT_NAMES,
    USER,
    WAIT_FOR_PODS_READY,
    KueueError,
    KueueLayout,
    check_can_run,
    features,
    install_after_ready,
    install_before_start,
    module_dir,
    ports_of,
    ready,
    render_config,
)


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


class KueueComponent(BuiltComponent[KueueLayout]):
    """Kueue (:data:`KUEUE_VERSION`) as an :class:`~hollowscale.cluster.installed.InstalledComponent`: run in its
    private mount namespace (:mod:`hollowscale.cluster.components.kueue`), which needs root."""

    name: str = "kueue"
    port_names: tuple[str, ...] = PORT_NAMES
    error = KueueError
    build_hint = "`make setup KUEUE=1` (or `hollowscale setup --kueue`) to build Kueue"

    def __init__(self, layout: KueueLayout, binary: Path,
                 wait_for_pods_ready: dict[str, Any] | None = WAIT_FOR_PODS_READY) -> None:
        super().__init__(layout, binary)
        #: Kueue's ``waitForPodsReady`` (v1beta2: present = on): the default, or a scenario's
        #: (:meth:`hollowscale.scenario.batch.PodsReadySpec.to_kueue`)
        self.wait_for_pods_ready = wait_for_pods_ready

    def find_module(self) -> Path:
        return module_dir()

    def check(self) -> None:
        """The binary (:class:`~hollowscale.cluster.installed.BuiltComponent`), then root and ``unshare``."""
        super().check()
        check_can_run()

    def prepare(self, pki_dir: Path, api: str, ports: Mapping[str, int], client_qps: tuple[float, int]) -> None:
        """Its certificates (webhook and metrics serving, client), kubeconfig, mount point and Configuration."""
        write_credentials(self.layout, pki_dir, self.name, USER, api)
        self.layout.mount_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        config = render_config(self.layout, ports_of(ports), client_qps=client_qps,
                               wait_for_pods_ready=self.wait_for_pods_ready)
        self.layout.config.write_text(yaml.safe_dump(config, sort_keys=False))

    def install_before_start(self, kubectl: Kubectl, timeout_s: float) -> None:
        install_before_start(kubectl, self.module, self.layout, timeout_s)

    def argv(self) -> list[str]:
        return namespaced_argv(argv(self.binary, self.layout), self.layout)

    def ready(self, ports: Mapping[str, int]) -> bool:
        return ready(ports_of(ports))

    def install_after_ready(self, kubectl: Kubectl, ports: Mapping[str, int], ca_pem: bytes) -> dict[str, Any]:
        return {"webhooks": install_after_ready(kubectl, self.module, self.layout, ports_of(ports), ca_pem)}

    def features(self, ports: Mapping[str, int]) -> dict[str, Any]:
        return features(ports_of(ports), wait_for_pods_ready=self.wait_for_pods_ready)

    def metrics(self, ports: Mapping[str, int]) -> tuple[str, Path] | None:
        return f"https://127.0.0.1:{ports['kueue-metrics']}/metrics", self.layout.token
