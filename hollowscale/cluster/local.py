"""The embedded cluster backend: etcd, kube-apiserver, kube-controller-manager and kube-scheduler
as local processes on 127.0.0.1 (what KWOK calls the "binary runtime").

``LocalCluster.up`` starts the components in dependency order (each one's command line is a pure function
in :mod:`hollowscale.cluster.components`; this module gathers their settings), writing ``state.json`` after each one
so that ``down`` can always stop exactly what was started, even after a crash or Ctrl-C half-way.
A component that exits at start fails ``up`` with a one-line reason and the path of its log, and
every process started so far is stopped before the error is raised.

Every component runs under the cluster's supervisor (:mod:`hollowscale.cluster.supervisor`), which
restarts one that exits later with the kubelet's crash-loop backoff, as a real control plane's static
pods are restarted; ``status`` shows restarts and the last reason, ``down`` stops the supervisor
first.  The apiserver writes a narrow audit log (creates of pods, bindings and Jobs) so a run can
count what the apiserver itself accepted, across restarts of any component.

Batch scheduling: ``gang_scheduling`` turns on the in-tree gang scheduling gates of our Kubernetes
build (Workload/PodGroup, ``scheduling.k8s.io/v1alpha2``) on apiserver, scheduler and
controller-manager; ``kueue`` and ``jobset`` add Kueue and JobSet as more supervised components, each
given what its install has (CRDs, RBAC, webhooks, certificates) behind one interface
(:class:`~hollowscale.cluster.installed.InstalledComponent`; :data:`INSTALLABLE`; :mod:`hollowscale.cluster.kueue`,
:mod:`hollowscale.cluster.jobset`).  All are recorded in ``state.json`` (``ClusterInfo.features``); ``up`` on a
running cluster started with other features refuses.

Real nodes (:mod:`hollowscale.cluster.realnode`): ``real_nodes=N`` (or a
:class:`~hollowscale.cluster.realnode.RealNodeSettings`) starts N kubelets, each with its own containerd,
as more supervised components once the control plane is ready; :meth:`LocalCluster.add_real_nodes` adds
more to a running cluster.  ``down`` takes their pods, mounts, network namespaces and bridge apart after
the supervisor stopped them (:func:`hollowscale.cluster.realnode.tear_down`).  The apiserver always gets a
kubelet client certificate (``system:masters``) and prefers nodes' InternalIP, so ``kubectl logs`` and
``exec`` reach a real kubelet.
"""

from __future__ import annotations

import dataclasses
import json
import os
import ssl
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import yaml

from hollowscale.cluster import clusterdir, gang, realnode
from hollowscale.cluster import kueue as kueue_mod
from hollowscale.cluster.binaries import Binaries, binaries, jobset_binary, kubelet_binary, kueue_binary
from hollowscale.cluster.components import apiserver, controller_manager, etcd, scheduler
from hollowscale.cluster.components.kueue import KueueComponent
from hollowscale.cluster.installed import INSTALLABLE, InstalledComponent, InstalledComponentError
from hollowscale.cluster.jobset import JobSetComponent, JobSetLayout
from hollowscale.cluster.kubectl import Kubectl
from hollowscale.cluster.pki import ClusterPKI, create_pki, write_kubeconfig
from hollowscale.cluster.profiles import Profile, get_profile, with_client_limits
from hollowscale.cluster.realnode import pool as realnode_pool
from hollowscale.cluster.supervisor import ComponentSpec, ComponentState, add_component, component_states
from hollowscale.cluster.supervisor import read_events as read_supervisor_events
from hollowscale.cluster.supervisor import request as supervisor_request
from hollowscale.paths import REPO_ROOT
from hollowscale.versions import ETCD_VERSION, KUBERNETES_VERSION
from kubecore.procs import ProcessRecord, failure_reason, free_ports, port_in_use, spawn, stop
from kubecore.procs import record as process_record
from kubecore.tls import client_ssl_context

DEFAULT_DIR = Path(".hollowscale/cluster")
COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler")
ProgressFn = Callable[[str], None]


class ClusterError(RuntimeError):
    """The local cluster could not be started or used; the message is one line plus a log path."""


@dataclass(frozen=True)
class ClusterInfo:
    """Everything a client of a running local cluster needs (written to ``state.json``).

    Attributes:
        dir: the cluster directory (state, certificates, logs).
        kubeconfig: admin kubeconfig (``system:masters``).
        server: kube-apiserver URL.
        profile: ``default`` or ``scale`` (see :mod:`hollowscale.cluster.profiles`).
        metrics: component -> metrics URL (apiserver needs the admin cert; scheduler and
            controller-manager allow anonymous /metrics over https with a self-signed cert; etcd http).
        pids: component -> pid.
        client_qps: component -> (client QPS, burst).
        flags: component -> the exact command line it runs with.
        reused: True when ``up`` found this cluster already running.
        features: what the cluster was started with: ``gang_scheduling`` (bool), ``feature_gates``
            (component -> the gates it got, ``Name=true``), ``feature_gates_dropped`` (component -> gates
            its binary does not know), ``runtime_config`` (apiserver, or None), ``kueue`` (None, or its
            ``version``, ``feature_gates``, ``frameworks``, ``fair_sharing``, ``wait_for_pods_ready``,
            ``namespace``, ``ports`` and the registered ``webhooks``).
        metrics_tokens: component -> file with the bearer token its metrics need (``kueue``).
        real_nodes: the real nodes (name, kubelet and healthz ports, root dir, containerd socket, pod
            address range, fake GPUs), in start order.
        pod_network: the real nodes' pod network (``bridge``, ``cidr``, ``gateway`` = every real node's IP),
            or None without real nodes.
    """

    dir: Path
    kubeconfig: Path
    server: str
    profile: str
    kubernetes_version: str
    etcd_version: str
    ca_file: Path
    admin_cert: Path
    admin_key: Path
    metrics: dict[str, str]
    pids: dict[str, int]
    client_qps: dict[str, tuple[float, int]]
    flags: dict[str, list[str]]
    ports: dict[str, int]
    started_at: float
    reused: bool = False
    features: dict[str, Any] = field(default_factory=dict)
    metrics_tokens: dict[str, Path] = field(default_factory=dict)
    real_nodes: list[realnode.RealNodeInfo] = field(default_factory=list)
    pod_network: dict[str, str] | None = None

    @property
    def kueue(self) -> bool:
        """True when Kueue runs as a component of this cluster."""
        return bool(self.features.get("kueue"))

    def ssl_context(self) -> ssl.SSLContext:
        """mTLS context of the admin user, verifying the cluster CA."""
        ctx: ssl.SSLContext = client_ssl_context(str(self.ca_file), str(self.admin_cert), str(self.admin_key))
        return ctx


@dataclass
class ComponentStatus:
    """One component as ``cluster status`` reports it.

    Attributes:
        state: ``running``, ``backoff`` (exited, restart pending), ``stalled``, ``stopped``, ``exited``.
        restarts: how many times the supervisor started it again.
        last_reason: the last exit (code or signal) and the log line that best says why.
    """

    name: str
    pid: int
    alive: bool
    log: Path
    state: str = "running"
    restarts: int = 0
    last_reason: str = ""


@dataclass
class _State:
    """What ``state.json`` holds: enough to stop every process and describe the cluster."""

    profile: str
    ports: dict[str, int]
    processes: list[dict[str, Any]] = field(default_factory=list)
    started_at: float = field(default_factory=time.time)
    flags: dict[str, list[str]] = field(default_factory=dict)
    complete: bool = False
    features: dict[str, Any] = field(default_factory=dict)
    #: ``network`` (bridge, cidr, gateway) and ``nodes`` (RealNodeInfo as dicts)
    real_nodes: dict[str, Any] = field(default_factory=dict)
    #: client limits that differ from the profile's: component -> [qps, burst]
    client_limits: dict[str, list[float]] = field(default_factory=dict)


class LocalCluster:
    """A local control plane in ``dir``.

    Args:
        dir: cluster directory: created (or, when empty, taken) and marked by ``up``; ``down`` removes
            only what the cluster put there (:mod:`hollowscale.cluster.clusterdir`).
        profile: ``default`` (upstream limits) or ``scale`` (limits lifted).
        apiserver_port: fixed kube-apiserver port, or 0 for a free one.
        bins: binaries to run (default: the cached ones of the pinned versions).
        gang_scheduling: turn on the in-tree gang scheduling gates (:data:`hollowscale.cluster.gang.GANG_GATES`) and
            ``scheduling.k8s.io/v1alpha2`` (Workload, PodGroup).
        kueue: run Kueue (:data:`hollowscale.versions.KUEUE_VERSION`) as one more component, with its
            CRDs, RBAC and webhooks installed (needs root: it runs in a private mount namespace).
        kueue_bin: the Kueue binary (default: the cached one; ``make setup KUEUE=1`` builds it).
        jobset: run JobSet (:data:`hollowscale.versions.JOBSET_VERSION`) as one more component, with its CRD,
            RBAC and webhooks installed (:mod:`hollowscale.cluster.jobset`); no root needed.
        jobset_bin: the JobSet binary (default: the cached one; ``hollowscale setup --jobset`` builds it).
        real_nodes: real nodes to start with the cluster (a count, or settings with fake GPUs); needs
            root, containerd, runc, the CNI plugins and the kubelet (``make setup-test``).
        kubelet_bin: the kubelet binary (default: the cached one).
        client_limits: client (QPS, burst) per component that differ from the profile's
            (:func:`hollowscale.cluster.profiles.with_client_limits`; a plan varies them).
        scheduler_config: the run's own KubeSchedulerConfiguration fields (profiles, ...; see
            ``components.scheduler.USER_FIELDS``): a trace replay's scheduler profile.
        kueue_pods_ready: Kueue's ``waitForPodsReady`` (timeout, recovery timeout, requeuing backoff) when a
            scenario sets it; None: Kueue's as :data:`hollowscale.cluster.kueue.WAIT_FOR_PODS_READY` says.
    """

    def __init__(self, dir: Path = DEFAULT_DIR, profile: str = "default", apiserver_port: int = 0,
                 bins: Binaries | None = None, gang_scheduling: bool = False, kueue: bool = False,
                 kueue_bin: Path | None = None, real_nodes: int | realnode.RealNodeSettings | None = None,
                 kubelet_bin: Path | None = None, client_limits: dict[str, tuple[float, int]] | None = None,
                 scheduler_config: dict[str, Any] | None = None, jobset: bool = False,
                 jobset_bin: Path | None = None, kueue_pods_ready: dict[str, Any] | None = None) -> None:
        self.dir = Path(dir).absolute()
        self.client_limits = dict(client_limits or {})
        #: the run's own KubeSchedulerConfiguration fields (``scheduler.USER_FIELDS``: profiles ...)
        self.scheduler_config = dict(scheduler_config or {})
        self.profile: Profile = with_client_limits(get_profile(profile), self.client_limits)
        self.apiserver_port = apiserver_port
        self.bins = bins or binaries()
        self.gang_scheduling = gang_scheduling
        self.kueue_bin = kueue_bin or kueue_binary()
        self.kueue_pods_ready = kueue_pods_ready or kueue_mod.WAIT_FOR_PODS_READY
        self.jobset_bin = jobset_bin or jobset_binary()
        #: controllers installed beside the control plane (:class:`~hollowscale.cluster.installed.InstalledComponent`)
        self.installed: list[InstalledComponent] = [self.installable(name) for name in INSTALLABLE
                                                    if {"kueue": kueue, "jobset": jobset}[name]]
        self.real_nodes = (real_nodes if isinstance(real_nodes, realnode.RealNodeSettings)
                           else realnode.RealNodeSettings(count=int(real_nodes or 0)))
        self.kubelet_bin = kubelet_bin or kubelet_binary()
        #: what the last ``down`` undid for real nodes (containers deleted, mounts, links, host state)
        self.real_node_teardown: list[str] = []
        #: what the last ``down`` left in the cluster dir (not made by hollowscale, mount points, errors)
        self.left_in_place: list[str] = []
        #: whether the last ``down`` removed the cluster dir itself (only one that ``up`` created)
        self.dir_removed = False

    def installable(self, name: str) -> InstalledComponent:
        """The component ``name`` of :data:`INSTALLABLE` for this cluster's dir and binaries."""
        if name == "kueue":
            return KueueComponent(self.kueue_layout, self.kueue_bin, self.kueue_pods_ready)
        if name == "jobset":
            return JobSetComponent(JobSetLayout(self.dir / "jobset"), self.jobset_bin)
        raise ValueError(f"no installable component {name!r}; expected one of: {', '.join(INSTALLABLE)}")

    @property
    def kueue(self) -> bool:
        """Whether it runs Kueue (one of :attr:`installed`)."""
        return any(c.name == "kueue" for c in self.installed)

    @property
    def jobset(self) -> bool:
        """Whether it runs JobSet (one of :attr:`installed`)."""
        return any(c.name == "jobset" for c in self.installed)

    @property
    def kueue_layout(self) -> kueue_mod.KueueLayout:
        return kueue_mod.KueueLayout(self.dir / "kueue")

    # ----------------------------------------------------------------- paths
    @property
    def state_path(self) -> Path:
        return self.dir / "state.json"

    @property
    def kubeconfig_path(self) -> Path:
        return self.dir / "kubeconfig"

    def log_path(self, component: str) -> Path:
        return self.dir / "logs" / f"{component}.log"

    @property
    def audit_log_path(self) -> Path:
        """The apiserver's audit log (appended to by every apiserver process of this cluster)."""
        return self.dir / "logs" / "audit.log"

    # ----------------------------------------------------------------- state
    def _load_state(self) -> _State | None:
        try:
            raw = json.loads(self.state_path.read_text())
        except FileNotFoundError:
            return None
        except (json.JSONDecodeError, OSError) as exc:
            raise ClusterError(f"{self.state_path} is unreadable ({exc}); remove {self.dir} by hand") from None
        try:
            return _State(**raw)
        except TypeError:
            raise ClusterError(f"{self.state_path} is not a hollowscale cluster state") from None

    def _save_state(self, state: _State) -> None:
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(state), indent=2))
        tmp.replace(self.state_path)

    @staticmethod
    def _records(state: _State) -> list[ProcessRecord]:
        return [ProcessRecord(**p) for p in state.processes]

    def info(self) -> ClusterInfo | None:
        """The running cluster's description, or None when this dir has no (complete) cluster."""
        state = self._load_state()
        if state is None or not state.complete:
            return None
        return self._info(state, reused=True)

    def _info(self, state: _State, reused: bool) -> ClusterInfo:
        pki = self.dir / "pki"
        ports = state.ports
        profile = with_client_limits(get_profile(state.profile),
                                     {k: (float(v[0]), int(v[1])) for k, v in state.client_limits.items()})
        metrics = {
            "apiserver": f"https://127.0.0.1:{ports['kube-apiserver']}/metrics",
            "controller-manager": f"https://127.0.0.1:{ports['kube-controller-manager']}/metrics",
            "scheduler": f"https://127.0.0.1:{ports['kube-scheduler']}/metrics",
            "etcd": f"http://127.0.0.1:{ports['etcd-metrics']}/metrics",
        }
        tokens: dict[str, Path] = {}
        # what the running cluster has, whatever this object was asked for (`cluster status` asks for nothing)
        for component in (self.installable(name) for name in INSTALLABLE if state.features.get(name)):
            served = component.metrics(ports)
            if served is not None:
                metrics[component.name], tokens[component.name] = served
        return ClusterInfo(
            dir=self.dir,
            kubeconfig=self.kubeconfig_path,
            server=f"https://127.0.0.1:{ports['kube-apiserver']}",
            profile=state.profile,
            kubernetes_version=KUBERNETES_VERSION,
            etcd_version=ETCD_VERSION,
            ca_file=pki / "ca.crt",
            admin_cert=pki / "admin.crt",
            admin_key=pki / "admin.key",
            metrics=metrics,
            pids={**{p["name"]: p["pid"] for p in state.processes},
                  **{n: c.pid for n, c in component_states(self.dir).items()}},
            client_qps={**profile.client_qps(),
                        **{name: profile.limits(name) for name in INSTALLABLE if state.features.get(name)}},
            flags=state.flags,
            ports=dict(ports),
            started_at=state.started_at,
            reused=reused,
            features=dict(state.features),
            metrics_tokens=tokens,
            real_nodes=[realnode.RealNodeInfo(**n) for n in state.real_nodes.get("nodes", [])],
            pod_network=dict(state.real_nodes["network"]) if state.real_nodes.get("network") else None,
        )

    def status(self) -> list[ComponentStatus]:
        """The supervisor and each component, with state and restarts (empty when nothing was started)."""
        state = self._load_state()
        if state is None:
            return []
        out = [ComponentStatus(r.name, r.pid, r.alive(), self.log_path(r.name),
                               state="running" if r.alive() else "exited") for r in self._records(state)]
        for name, c in component_states(self.dir).items():
            alive = c.record().alive()
            shown = c.state if alive or c.state in ("backoff", "stopped") else "exited"
            out.append(ComponentStatus(name, c.pid, alive, self.log_path(name), state=shown, restarts=c.restarts,
                                       last_reason=c.last_reason))
        return out

    def supervisor_alive(self) -> bool:
        """True while the supervisor of this cluster runs (components are restarted only then)."""
        state = self._load_state()
        return state is not None and any(r.name == "supervisor" and r.alive() for r in self._records(state))

    def components(self) -> dict[str, ComponentState]:
        """The supervised components as the supervisor last wrote them."""
        return component_states(self.dir)

    def events(self) -> list[dict[str, Any]]:
        """The supervisor's event log: starts, exits (code, reason, log tail), restarts, stalls, kills."""
        return read_supervisor_events(self.dir)

    def fault(self, action: str, component: str, duration_s: float = 0.0) -> dict[str, Any]:
        """Stall (SIGSTOP for ``duration_s``), kill (SIGKILL, restarted with backoff) or restart a component.

        Returns the supervisor's acknowledgement event.
        """
        return supervisor_request(self.dir, action, component, duration_s)

    # ----------------------------------------------------------------- up
    def up(self, progress: ProgressFn | None = None, timeout_s: float = 120.0) -> ClusterInfo:
        """Start the cluster (or reuse the running one) and wait until it is ready.

        Ready means: apiserver ``/readyz`` ok, the ``default`` ServiceAccount exists, and scheduler and
        controller-manager hold their leader leases.
        """
        say = progress or (lambda _msg: None)
        try:
            clusterdir.check_usable(self.dir)
        except clusterdir.ForeignDirError as exc:
            raise ClusterError(str(exc)) from None
        existing = self._load_state()
        if existing is not None:
            statuses = self.status()
            dead = [s.name for s in statuses if not s.alive and s.state != "backoff"]
            if existing.complete and not dead:
                self._check_features(existing)
                say(f"cluster already running in {self.dir} (profile {existing.profile}); reusing it")
                missing_nodes = self.real_nodes.count - len(existing.real_nodes.get("nodes", []))
                if missing_nodes > 0:  # up is idempotent: it adds the real nodes asked for and not there yet
                    self.add_real_nodes(dataclasses.replace(self.real_nodes, count=missing_nodes), say, timeout_s)
                    existing = self._load_state() or existing
                return self._info(existing, reused=True)
            reason = (f"{', '.join(dead)} exited" if dead else "an earlier start did not finish")
            raise ClusterError(
                f"the cluster in {self.dir} is degraded ({reason}); run `hollowscale cluster down "
                f"--dir {self.dir}` first"
            )
        missing = self.bins.missing()
        if missing:
            raise ClusterError(f"missing binary {missing[0]}; run `make setup` to build the control plane")
        for component in self.installed:
            try:
                component.check()
            except InstalledComponentError as exc:
                raise ClusterError(str(exc)) from None
        if self.real_nodes.count:
            try:
                realnode_pool.check_can_run(self.kubelet_bin)
            except realnode.RealNodeError as exc:
                raise ClusterError(str(exc)) from None
        if self.apiserver_port and port_in_use(self.apiserver_port):
            raise ClusterError(f"port {self.apiserver_port} on 127.0.0.1 is already in use; pick another "
                               "with --port or stop what listens there")
        try:
            return self._start(say, timeout_s)
        except BaseException:
            # Ctrl-C, a component that died, a timeout: leave nothing behind.
            self.down()
            raise

    def _check_features(self, existing: _State) -> None:
        """Refuse to reuse a running cluster started with other batch-scheduling features."""
        running = {"gang_scheduling": bool(existing.features.get("gang_scheduling")),
                   **{name: bool(existing.features.get(name)) for name in INSTALLABLE}}
        wanted = {"gang_scheduling": self.gang_scheduling,
                  **{name: any(c.name == name for c in self.installed) for name in INSTALLABLE}}
        ran = (existing.features.get("kueue") or {}).get("wait_for_pods_ready") if running["kueue"] else None
        if running["kueue"] and wanted["kueue"] and ran != self.kueue_pods_ready:
            raise ClusterError(f"the running cluster in {self.dir} runs Kueue with waitForPodsReady {ran}, this asks "
                               f"for {self.kueue_pods_ready}; stop it (hollowscale cluster down --dir {self.dir}) "
                               "or use another --dir")
        if running != wanted:
            def show(f: dict[str, bool]) -> str:
                on = [k.replace("_", "-") for k, v in f.items() if v]
                return ", ".join(on) if on else "none"

            raise ClusterError(
                f"the running cluster in {self.dir} has features {show(running)}, this asks for {show(wanted)}; "
                f"stop it (hollowscale cluster down --dir {self.dir}) or use another --dir")

    def feature_gates(self) -> dict[str, list[str]]:
        """component -> the gang gates it gets (``Name=true``): only those its binary knows."""
        if not self.gang_scheduling:
            return {}
        return gang.gates_for({"kube-apiserver": str(self.bins.kube_apiserver),
                               "kube-controller-manager": str(self.bins.kube_controller_manager),
                               "kube-scheduler": str(self.bins.kube_scheduler)})

    def _features(self, ports: dict[str, int]) -> dict[str, Any]:
        gates = self.feature_gates()
        return {
            "gang_scheduling": self.gang_scheduling,
            "feature_gates": gates,
            "feature_gates_dropped": {c: [g for g in gang.GANG_GATES if f"{g}=true" not in got]
                                      for c, got in gates.items() if len(got) < len(gang.GANG_GATES)},
            "runtime_config": gang.GANG_RUNTIME_CONFIG if self.gang_scheduling else None,
            **{name: None for name in INSTALLABLE},
            **{c.name: c.features(ports) for c in self.installed},
            "kubelet_client": True,
        }

    def _start(self, say: ProgressFn, timeout_s: float) -> ClusterInfo:
        deadline = time.monotonic() + timeout_s
        try:
            clusterdir.claim_cluster_dir(self.dir)  # the marker first: down removes only a marked folder's
        except clusterdir.ForeignDirError as exc:
            raise ClusterError(str(exc)) from None
        (self.dir / "logs").mkdir(exist_ok=True)
        names = ["etcd", "etcd-peer", "etcd-metrics", "kube-apiserver", "kube-controller-manager",
                 "kube-scheduler"]
        for component in self.installed:
            names += list(component.port_names)
        ports = dict(zip(names, free_ports(len(names)), strict=True))
        if self.apiserver_port:
            ports["kube-apiserver"] = self.apiserver_port
        state = _State(profile=self.profile.name, ports=ports,
                       client_limits={k: [float(v[0]), int(v[1])] for k, v in self.client_limits.items()})
        state.features = self._features(ports)
        self._save_state(state)
        say("generating certificates")
        pki = create_pki(self.dir / "pki")
        self._write_kubeconfigs(pki, ports["kube-apiserver"])
        # the supervisor imports hollowscale: make the checkout importable whether or not it is installed
        path = os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p)
        supervisor = spawn([sys.executable, "-m", "hollowscale.cluster.supervisor", str(self.dir)],
                           self.log_path("supervisor"), cwd=self.dir, env={"PYTHONPATH": path})
        state.processes.append(asdict(process_record("supervisor", supervisor)))
        self._save_state(state)

        def launch(name: str, argv: list[str]) -> None:
            add_component(self.dir, ComponentSpec(name, argv, str(self.log_path(name)), str(self.dir)))
            state.flags[name] = argv
            self._save_state(state)

        def wait_for(what: str, check: Callable[[], bool]) -> None:
            say(f"waiting for {what}")
            while True:
                if supervisor.poll() is not None:
                    raise ClusterError(f"the cluster supervisor exited at start (code {supervisor.returncode}): "
                                       f"{failure_reason(self.log_path('supervisor'))} -- log: "
                                       f"{self.log_path('supervisor')}")
                for name, comp in component_states(self.dir).items():
                    if comp.last_exit_code is not None:
                        raise ClusterError(
                            f"{name} exited at start (code {comp.last_exit_code}): "
                            f"{failure_reason(self.log_path(name))} -- log: {self.log_path(name)}"
                        )
                if check():
                    return
                if time.monotonic() > deadline:
                    raise ClusterError(f"timed out after {timeout_s:.0f}s waiting for {what}; logs in "
                                       f"{self.dir / 'logs'}")
                time.sleep(0.1)

        ctx = client_ssl_context(str(pki.ca.cert), str(pki.admin.cert), str(pki.admin.key))
        api = f"https://127.0.0.1:{ports['kube-apiserver']}"

        say("starting etcd")
        launch("etcd", etcd.argv(self._etcd(pki, ports)))
        wait_for("etcd health", lambda: _get(f"http://127.0.0.1:{ports['etcd-metrics']}/health", None)[0] == 200)
        say("starting kube-apiserver")
        launch("kube-apiserver", apiserver.argv(self._apiserver(pki, ports)))
        wait_for("kube-apiserver /readyz", lambda: _get(f"{api}/readyz", ctx)[0] == 200)
        say("starting kube-controller-manager and kube-scheduler")
        launch("kube-controller-manager", controller_manager.argv(self._controller_manager(pki, ports)))
        launch("kube-scheduler", scheduler.argv(self._scheduler(ports)))
        installing = Kubectl(self.bins.kubectl, self.kubeconfig_path, InstalledComponentError)
        for component in self.installed:
            try:
                say(f"installing {component.name}'s CRDs and RBAC")
                component.prepare(self.dir / "pki", api, ports, self.profile.limits(component.name))
                component.install_before_start(installing, timeout_s=max(5.0, deadline - time.monotonic()))
            except InstalledComponentError as exc:
                raise ClusterError(f"{component.name}: {exc}") from None
            say(f"starting {component.name}")
            launch(component.name, component.argv())
        wait_for("leader leases of scheduler and controller-manager",
                 lambda: _lease_held(api, ctx, "kube-scheduler") and _lease_held(api, ctx, "kube-controller-manager"))
        wait_for("the default ServiceAccount",
                 lambda: _get(f"{api}/api/v1/namespaces/default/serviceaccounts/default", ctx)[0] == 200)
        for component in self.installed:
            wait_for(f"{component.name} /readyz", partial(component.ready, ports))
            try:
                say(f"registering {component.name}'s webhooks and its metrics token")
                extra = component.install_after_ready(installing, ports, pki.ca.cert.read_bytes())
            except InstalledComponentError as exc:
                raise ClusterError(f"{component.name}: {exc} -- log: {self.log_path(component.name)}") from None
            state.features[component.name].update(extra)
        if self.real_nodes.count:
            self._start_real_nodes(state, self.real_nodes, say, max(90.0, deadline - time.monotonic()))
        state.complete = True
        self._save_state(state)
        say(f"cluster ready at {api} (profile {self.profile.name})")
        return self._info(state, reused=False)

    # ----------------------------------------------------------------- real nodes
    def add_real_nodes(self, nodes: int | realnode.RealNodeSettings = 1, progress: ProgressFn | None = None,
                       timeout_s: float = 120.0) -> list[str]:
        """Start more real nodes in this running cluster and wait until they are Ready; their names.

        Names continue the numbering (``hs-real-<i>``).  A node that fails to start is left to ``down``
        (its components are supervised and its dirs are under the cluster dir).
        """
        settings = nodes if isinstance(nodes, realnode.RealNodeSettings) else realnode.RealNodeSettings(count=nodes)
        state = self._load_state()
        if state is None or not state.complete or not self.supervisor_alive():
            raise ClusterError(f"no running cluster in {self.dir}; start it with `hollowscale cluster up` first")
        if not state.features.get("kubelet_client"):
            raise ClusterError(f"the cluster in {self.dir} was started without the apiserver's kubelet client "
                               "certificate (an older hollowscale); restart it to add real nodes")
        try:
            realnode_pool.check_can_run(self.kubelet_bin)
        except realnode.RealNodeError as exc:
            raise ClusterError(str(exc)) from None
        infos = self._start_real_nodes(state, settings, progress or (lambda _m: None), timeout_s)
        return [i.name for i in infos]

    def _start_real_nodes(self, state: _State, settings: realnode.RealNodeSettings, say: ProgressFn,
                          timeout_s: float) -> list[realnode.RealNodeInfo]:
        pki_dir = self.dir / "pki"
        ctx = client_ssl_context(str(pki_dir / "ca.crt"), str(pki_dir / "admin.crt"), str(pki_dir / "admin.key"))
        api = f"https://127.0.0.1:{state.ports['kube-apiserver']}"
        known = state.real_nodes.setdefault("nodes", [])
        first = 1 + max((n["index"] for n in known), default=-1)

        def launch(name: str, argv: list[str]) -> None:
            add_component(self.dir, ComponentSpec(name, argv, str(self.log_path(name)), str(self.dir)))
            state.flags[name] = argv
            self._save_state(state)

        def problem(name: str) -> str | None:
            if not self.supervisor_alive():
                return f"cannot run: the cluster supervisor is not running -- log: {self.log_path('supervisor')}"
            comp = component_states(self.dir).get(name)
            if comp is not None and comp.last_exit_code is not None:
                return (f"exited at start (code {comp.last_exit_code}): {failure_reason(self.log_path(name))} "
                        f"-- log: {self.log_path(name)}")
            return None

        try:
            net, infos = realnode_pool.start_nodes(
                self.dir, first, settings, kubelet=self.kubelet_bin, pki_dir=pki_dir, api=api, ctx=ctx,
                launch=launch, problem=problem, free_ports=free_ports, say=say, timeout_s=timeout_s)
        except realnode.RealNodeError as exc:
            raise ClusterError(str(exc)) from None
        state.real_nodes["network"] = {"bridge": net.bridge, "cidr": net.cidr, "gateway": net.gateway}
        known.extend(i.to_dict() for i in infos)
        self._save_state(state)
        return infos

    # ----------------------------------------------------------------- down
    def is_cluster_dir(self) -> bool:
        """True when ``dir`` holds a cluster: marked by ``up``, or with the state of an older hollowscale's."""
        return clusterdir.is_cluster_dir(self.dir) or self._legacy_state() is not None

    def _legacy_state(self) -> _State | None:
        """The state of a cluster an older hollowscale started (no marker), or None."""
        if clusterdir.is_cluster_dir(self.dir) or not self.state_path.is_file():
            return None
        try:
            return self._load_state()
        except ClusterError:
            return None  # someone else's state.json: not ours to read

    def down(self, grace_s: float = 10.0) -> list[str]:
        """Stop the supervisor first (it stops its components, newest first, also one in backoff),
        then anything recorded that still runs (by pid and start time), then remove what the cluster put
        in its dir (:func:`~hollowscale.cluster.clusterdir.remove_cluster_dir`).

        A dir without ``up``'s marker is never removed: that of an older hollowscale's cluster has its
        processes stopped and its files left; any other is not touched at all.  What was left is in
        :attr:`left_in_place`.

        Returns the names of the components that were still running.
        """
        marked = clusterdir.is_cluster_dir(self.dir)
        state = (self._load_state() if marked else self._legacy_state()) if self.dir.is_dir() else None
        self.left_in_place, self.dir_removed = [], False
        stopped: list[str] = []
        if state is not None:
            comps = component_states(self.dir)
            stopped = [n for n, c in comps.items() if c.record().alive()]
            stopped += [r.name for r in self._records(state) if r.name != "supervisor" and r.alive()]
            for record in reversed(self._records(state)):
                # the supervisor stops its components itself, each with its own grace period
                stop(record, grace_s * (len(comps) + 2) if record.name == "supervisor" else grace_s)
            for comp in reversed(list(component_states(self.dir).values())):
                stop(comp.record(), grace_s)  # only what a killed supervisor left behind
        # real nodes' pods outlive their kubelet and containerd: take them apart (a no-op without any)
        self.real_node_teardown = realnode.tear_down(self.dir) if marked or state is not None else []
        if marked:
            removal = clusterdir.remove_cluster_dir(self.dir)
            self.left_in_place, self.dir_removed = removal.left, removal.removed_dir
        elif state is not None:
            self.left_in_place = [f"{self.dir} (a cluster of an older hollowscale, without {clusterdir.MARKER}: "
                                  "its processes were stopped, its files are left; remove the folder yourself)"]
        return stopped

    # ----------------------------------------------------------------- component settings
    def _gates(self, component: str) -> tuple[str, ...]:
        return tuple(self.feature_gates().get(component) or ())

    def _etcd(self, pki: ClusterPKI, ports: dict[str, int]) -> etcd.EtcdSettings:
        return etcd.EtcdSettings(binary=self.bins.etcd, data_dir=self.dir / "etcd", client_port=ports["etcd"],
                                 peer_port=ports["etcd-peer"], metrics_port=ports["etcd-metrics"],
                                 cert=pki.etcd_server.cert, key=pki.etcd_server.key, ca=pki.ca.cert)

    def _apiserver(self, pki: ClusterPKI, ports: dict[str, int]) -> apiserver.ApiserverSettings:
        policy = self.dir / "audit-policy.yaml"
        policy.write_text(yaml.safe_dump(apiserver.AUDIT_POLICY, sort_keys=False))
        return apiserver.ApiserverSettings(
            binary=self.bins.kube_apiserver, port=ports["kube-apiserver"], etcd_port=ports["etcd"], pki=pki,
            audit_policy=policy, audit_log=self.audit_log_path, cert_dir=self.dir / "pki" / "apiserver-generated",
            profile_flags=self.profile.apiserver_flags, feature_gates=self._gates("kube-apiserver"),
            runtime_config=gang.GANG_RUNTIME_CONFIG if self.gang_scheduling else None)

    def _controller_manager(self, pki: ClusterPKI, ports: dict[str, int]) -> controller_manager.ControllerManagerSettings:
        return controller_manager.ControllerManagerSettings(
            binary=self.bins.kube_controller_manager, kubeconfig=self.dir / "controller-manager.kubeconfig",
            port=ports["kube-controller-manager"], cert_dir=self.dir / "pki" / "kube-controller-manager", pki=pki,
            qps=self.profile.controller_manager_qps, burst=self.profile.controller_manager_burst,
            feature_gates=self._gates("kube-controller-manager"))

    def _scheduler(self, ports: dict[str, int]) -> scheduler.SchedulerSettings:
        settings = scheduler.SchedulerSettings(
            binary=self.bins.kube_scheduler, kubeconfig=self.dir / "scheduler.kubeconfig",
            config=self.dir / "scheduler-config.yaml", port=ports["kube-scheduler"],
            cert_dir=self.dir / "pki" / "kube-scheduler", qps=self.profile.scheduler_qps,
            burst=self.profile.scheduler_burst, feature_gates=self._gates("kube-scheduler"),
            user=tuple(self.scheduler_config.items()))
        settings.config.write_text(yaml.safe_dump(scheduler.config(settings)))
        return settings

    # ----------------------------------------------------------------- kubeconfigs
    def _write_kubeconfigs(self, pki: ClusterPKI, apiserver_port: int) -> None:
        server = f"https://127.0.0.1:{apiserver_port}"
        write_kubeconfig(self.kubeconfig_path, server, pki.ca.cert, pki.admin.cert, pki.admin.key,
                         user="kubernetes-admin", embed=True)
        write_kubeconfig(self.dir / "controller-manager.kubeconfig", server, pki.ca.cert,
                         pki.controller_manager.cert, pki.controller_manager.key, user="kube-controller-manager")
        write_kubeconfig(self.dir / "scheduler.kubeconfig", server, pki.ca.cert, pki.scheduler.cert,
                         pki.scheduler.key, user="kube-scheduler")


def _get(url: str, ctx: ssl.SSLContext | None, timeout: float = 2.0) -> tuple[int, bytes]:
    """GET a URL; (status, body), with status 0 when the server is not reachable yet."""
    try:
        with urllib.request.urlopen(url, timeout=timeout, context=ctx) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, b""
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
        return 0, b""


def _lease_held(api: str, ctx: ssl.SSLContext, name: str) -> bool:
    status, body = _get(f"{api}/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/{name}", ctx)
    if status != 200:
        return False
    return bool(json.loads(body).get("spec", {}).get("holderIdentity"))
