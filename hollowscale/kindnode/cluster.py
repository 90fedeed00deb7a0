"""A kind cluster from the node image built here: its kind config, and what it changes on the machine.

The cluster's *shape* stays the user's ``kind-config.yaml`` (nodes, roles, labels, taints, kubeadm
patches); :func:`render_kind_config` only puts our node image on every node and adds three patches on top
of the user's:

- ``failCgroupV1: false``: the v1.36 kubelet refuses a cgroup v1 host by default, and kind v0.33.0 never
  sets it (kind only warns on v1);
- the etcd and CoreDNS image tags we built (:func:`hollowscale.kindnode.image.kubeadm_image_patch`);
- kube-scheduler and kube-controller-manager serving on every address of the control-plane container
  (``bind-address: 0.0.0.0``; kubeadm binds them to 127.0.0.1 inside it) so that Prometheus on this machine
  can scrape them at the container's address on the cluster's own network
  (:data:`METRICS_PORTS`).  Nothing else about their serving changes: a scrape still authenticates (the
  harness's admin client certificate) and is authorised through the apiserver.

:class:`HostChanges` records what creating the cluster changes on the machine and puts it back:
the iptables chains podman's network backend adds (:mod:`hollowscale.kindnode.firewall`), and
``/lib/modules``, which kind's podman provider mounts read-only into every node and which some machines
(this project's among them) do not have: made empty for the cluster and removed after, only when it was
made here; and rootful podman's network run state (``/run/containers``, :mod:`hollowscale.kindnode.netavark`),
a folder every rootful podman shares: before the cluster, a ledger in our podman's state folder names the
exact DNS config path of kind's network and whether the folder was there; before and after, only the configs
it names whose network is gone are removed, and the folder, when a run of ours made it, is taken away path by
path (never with anything else in it).
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hollowscale.kindnode import firewall, netavark
from hollowscale.kindnode.image import kubeadm_image_patch

CGROUP_V1_PATCH = "kind: KubeletConfiguration\nfailCgroupV1: false\n"
METRICS_PATCH = ("kind: ClusterConfiguration\n"
                 "controllerManager:\n  extraArgs:\n    bind-address: \"0.0.0.0\"\n"
                 "scheduler:\n  extraArgs:\n    bind-address: \"0.0.0.0\"\n")
#: the secure ports kubeadm gives the two (its defaults, which kind keeps): scrape job -> port
METRICS_PORTS = {"controller-manager": 10257, "scheduler": 10259}
MODULES = Path("/lib/modules")
#: the network kind's podman provider makes for every cluster, whatever its name
KIND_NETWORK = "kind"


class KindConfigError(ValueError):
    """The kind config cannot be used: the message names the file and the field."""


def render_kind_config(doc: dict[str, Any], image: str, source: str = "kind-config.yaml",
                       worker_mounts: Callable[[int], Sequence[dict[str, Any]]] | None = None) -> dict[str, Any]:
    """``doc`` (a kind ``Cluster`` config) with ``image`` on every node and our cluster-level patches after
    the user's own (module docstring); ``doc`` itself is left as it was.

    ``worker_mounts(i)``: kind ``extraMounts`` entries for the ``i``-th worker (1-based, config order), added
    after the user's own: the folders the run's real pods read and the registry of its fake GPU plugin
    (:mod:`hollowscale.kindnode.gpus`).
    """
    if not isinstance(doc, dict) or doc.get("kind") != "Cluster":
        raise KindConfigError(f"{source}: kind: expected Cluster (a kind config), got {doc.get('kind')!r}"
                              if isinstance(doc, dict) else f"{source}: expected a mapping")
    out = copy.deepcopy(doc)
    nodes = out.get("nodes") or [{"role": "control-plane"}]
    if not isinstance(nodes, list) or not all(isinstance(n, dict) for n in nodes):
        raise KindConfigError(f"{source}: nodes: expected a list of nodes")
    if sum(1 for n in nodes if n.get("role", "control-plane") == "control-plane") != 1:
        raise KindConfigError(f"{source}: nodes: exactly one control-plane node (kind's load balancer for "
                              "several is an image from a registry, out of reach here)")
    workers = 0
    for node in nodes:
        node["image"] = image
        if worker_mounts is not None and node.get("role", "control-plane") == "worker":
            workers += 1
            extra = list(worker_mounts(workers))
            if extra:
                node["extraMounts"] = [*(node.get("extraMounts") or []), *extra]
    out["nodes"] = nodes
    patches = out.get("kubeadmConfigPatches") or []
    if not isinstance(patches, list):
        raise KindConfigError(f"{source}: kubeadmConfigPatches: expected a list")
    out["kubeadmConfigPatches"] = [*patches, CGROUP_V1_PATCH, kubeadm_image_patch(), METRICS_PATCH]
    return out


def node_names(cluster: str, doc: dict[str, Any]) -> list[str]:
    """kind's names for the nodes of config ``doc`` (a rendered one: exactly one control plane), in config order:
    ``<cluster>-control-plane``, ``<cluster>-worker``, ``<cluster>-worker2``, ... (kind v0.33.0's
    ``pkg/cluster/internal/providers/common/namer.go``)."""
    seen: dict[str, int] = {}
    names = []
    for node in doc.get("nodes") or ():
        role = node.get("role", "control-plane")
        seen[role] = seen.get(role, 0) + 1
        names.append(f"{cluster}-{role}{seen[role] if seen[role] > 1 else ''}")
    return names


@dataclass
class HostChanges:
    """What a kind cluster changes on the machine, recorded before it is created (:meth:`record`) and put
    back after it is deleted (:meth:`restore`)."""

    firewall_before: dict[str, firewall.Rules] = field(default_factory=dict)
    #: our podman's network config folder; its ledger of the shared run state is beside it (:mod:`.netavark`)
    own_networks: Path = Path()
    #: the networks the cluster makes in our podman (kind's, :data:`KIND_NETWORK`)
    networks: tuple[str, ...] = (KIND_NETWORK,)
    made_modules: bool = False
    #: the ledger says a run of ours made podman's run state (this one or an earlier, interrupted one)
    made_run_dir: bool = False
    #: what :meth:`record` cleared: stale network state an earlier cluster of ours left (:mod:`.netavark`)
    cleared: list[str] = field(default_factory=list)

    @classmethod
    def record(cls, own_networks: Path, modules: Path = MODULES, run_dir: Path = netavark.RUN_DIR,
               networks: tuple[str, ...] = (KIND_NETWORK,)) -> HostChanges:
        """Clear the DNS configs an earlier cluster of ours left in podman's run state (``run_dir``), note in
        the ledger the exact configs ``networks`` will make there and whether ``run_dir`` is there yet (before
        the cluster: a creation killed midway is still on record), snapshot the firewall, and make ``modules``
        (empty) when it is missing.

        Raises:
            netavark.ForeignDnsConfigError: a DNS config of one of ``networks`` that is not ours is in the way.
        """
        ledger = netavark.Ledger.load(netavark.ledger_path(own_networks))
        cleared = netavark.clear_own_stale_dns(ledger, own_networks, run_dir)
        netavark.note_before_create(ledger, own_networks, run_dir, networks)
        changes = cls(firewall.snapshot(), own_networks=own_networks, networks=networks,
                      made_run_dir=ledger.made_run_dir(run_dir), cleared=cleared)
        if not modules.exists():
            modules.mkdir()
            changes.made_modules = True
        return changes

    def restore(self, modules: Path = MODULES, run_dir: Path = netavark.RUN_DIR) -> list[str]:
        """Take away the firewall chains added since :meth:`record`, the cluster's DNS config if its
        network went without netavark's teardown, podman's run state if the ledger says a run of ours made
        it, and the ``modules`` folder made by :meth:`record` (only while still empty); what was done."""
        done = firewall.restore(self.firewall_before)
        ledger = netavark.Ledger.load(netavark.ledger_path(self.own_networks))
        done += netavark.clear_own_stale_dns(ledger, self.own_networks, run_dir)
        if str(run_dir) in ledger.run_dirs:
            finished = True
            if ledger.made_run_dir(run_dir) and run_dir.exists():
                line, finished = netavark.remove_run_dir(run_dir, self.networks)
                done.append(line)
            if finished:
                del ledger.run_dirs[str(run_dir)]
                ledger.save()
        self.made_run_dir = ledger.made_run_dir(run_dir)
        if self.made_modules:
            try:
                modules.rmdir()
                done.append(f"rmdir {modules}")
            except OSError as exc:  # someone put something in it meanwhile: theirs now
                done.append(f"left {modules}: {os.strerror(exc.errno or 0)}")
            self.made_modules = False
        return done


__all__ = ["CGROUP_V1_PATCH", "KIND_NETWORK", "METRICS_PATCH", "METRICS_PORTS", "HostChanges", "KindConfigError",
           "node_names", "render_kind_config"]
