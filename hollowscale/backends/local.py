"""``cluster.backend: local``: the embedded control plane (:class:`hollowscale.cluster.local.LocalCluster`),
started by the run or reused when it already runs in the cluster folder; stopped afterwards only when
this run started it."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from hollow.dra import GPU_MODELS
from hollowscale.backends.base import BackendSettings, ClusterAccess, ClusterFacts
from hollowscale.cluster.local import ClusterInfo, LocalCluster
from hollowscale.cluster.realnode import RealNodeSettings
from hollowscale.cluster.realnode.access import LocalRealNodes
from hollowscale.measure.prom import targets_from_metrics
from hollowscale.paths import REPO_ROOT
from hollowscale.scenario.model import ClusterSpec
from kubecore.config import load_endpoint


class SupervisedControlPlane:
    """The local cluster's components under its supervisor: events, faults, the audit log."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.cluster = cluster

    @property
    def audit_log(self) -> Path | None:
        return self.cluster.audit_log_path

    def problem(self) -> str | None:
        if self.cluster.supervisor_alive():
            return None
        return f"the local cluster's supervisor exited (log: {self.cluster.log_path('supervisor')})"

    def events(self) -> list[dict[str, Any]]:
        return self.cluster.events()

    def fault(self, action: str, component: str, duration_s: float) -> dict[str, Any]:
        return self.cluster.fault(action, component, duration_s)


def real_node_settings(c: ClusterSpec) -> RealNodeSettings:
    """The real nodes ``cluster`` (a ClusterSpec) asks for, with their fake GPUs (``real_node_gpus``)."""
    g = c.real_node_gpus
    if g is None:
        return RealNodeSettings(count=c.real_nodes)
    if g.expose == "counted":
        return RealNodeSettings(count=c.real_nodes, fake_gpus=g.count, gpu_model=GPU_MODELS[g.model].product)
    return RealNodeSettings(count=c.real_nodes, dra_gpus=g.count, dra=g.gpu_spec())


def _gpus_differ(info: ClusterInfo, wanted: RealNodeSettings) -> bool:
    """A reused cluster's real nodes offer other GPUs than the scenario asks for."""
    return any((n.fake_gpus, n.dra_gpus) != (wanted.fake_gpus, wanted.dra_gpus) for n in info.real_nodes)


def facts(info: ClusterInfo) -> ClusterFacts:
    """What the report says about a local cluster."""
    return ClusterFacts(profile=info.profile, kubernetes_version=info.kubernetes_version,
                        etcd_version=info.etcd_version, client_qps=info.client_qps, flags=info.flags,
                        features=info.features, reused=bool(info.reused),
                        real_nodes=[dataclasses.asdict(n) for n in info.real_nodes], supervised=True)


class LocalBackend:
    """The local control plane in ``cluster.dir`` (default ``.hollowscale/cluster[-<profile>]``; a
    variant without ``cluster.dir`` gets a fresh one in its run folder)."""

    def __init__(self, settings: BackendSettings) -> None:
        self.settings = settings
        self.cluster: LocalCluster | None = None
        self.started = False

    def _dir(self) -> Path:
        sc = self.settings.scenario
        c = sc.cluster
        if c.dir:
            return Path(c.dir)
        if sc.variant:  # each variant on a fresh cluster of its own
            return self.settings.run_dir / "cluster"
        return REPO_ROOT / ".hollowscale" / ("cluster" if c.profile == "default" else f"cluster-{c.profile}")

    def up(self) -> ClusterAccess:
        c = self.settings.scenario.cluster
        log = self.settings.log
        d = self._dir()
        nodes = real_node_settings(c)
        self.cluster = LocalCluster(d, profile=c.profile, gang_scheduling=c.gang_scheduling, kueue=c.kueue,
                                    real_nodes=nodes, jobset=c.jobset,
                                    kueue_pods_ready=c.kueue_pods_ready.to_kueue() if c.kueue_pods_ready else None)
        info = self.cluster.up(progress=log, timeout_s=240)
        if info.profile != c.profile:
            raise RuntimeError(f"the running cluster in {d} has profile {info.profile!r}, the scenario asks for "
                               f"{c.profile!r}; stop it (hollowscale cluster down --dir {d}) or set cluster.dir")
        if info.reused and c.real_node_gpus is not None and _gpus_differ(info, nodes):
            raise RuntimeError(f"the running cluster in {d} has real nodes without the GPUs cluster.real_node_gpus "
                               f"asks for; stop it (hollowscale cluster down --dir {d}) or set cluster.dir")
        missing = c.real_nodes - len(info.real_nodes)
        if info.reused and missing > 0:  # a running cluster with fewer real nodes than the scenario asks
            log(f"adding {missing} real node(s) to the running cluster")
            self.cluster.add_real_nodes(dataclasses.replace(nodes, count=missing), progress=log, timeout_s=180)
            info = self.cluster.info() or info
        self.started = not info.reused
        endpoint = load_endpoint(Path(info.kubeconfig))
        return ClusterAccess(
            endpoint=endpoint, kubeconfig=Path(info.kubeconfig),
            metrics=targets_from_metrics(info.metrics, str(info.ca_file), str(info.admin_cert), str(info.admin_key),
                                         tokens=info.metrics_tokens),
            facts=facts(info), control_plane=SupervisedControlPlane(self.cluster),
            started_pids=dict(info.pids) if self.started else {},
            real_nodes=LocalRealNodes.at([str(n.containerd_socket) for n in info.real_nodes], endpoint.server))

    def down(self) -> None:
        if self.cluster is not None and self.started and not self.settings.keep_cluster:
            self.settings.log("stopping the local cluster this run started")
            self.cluster.down()
