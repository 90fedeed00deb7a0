"""The embedded cluster backend: etcd, kube-apiserver, kube-controller-manager and kube-scheduler
as local processes on 127.0.0.1 (what KWOK calls the "binary runtime").

``LocalCluster.up`` starts the components in dependency order, writing ``state.json`` after each one
so that ``down`` can always stop exactly what was started, even after a crash or Ctrl-C half-way.
A component that exits at start fails ``up`` with a one-line reason and the path of its log, and
every process started so far is stopped before the error is raised.

Every component runs under the cluster's supervisor (:mod:`hollowscale.cluster.supervisor`), which
restarts one that exits later with the kubelet's crash-loop backoff, as a real control plane's static
pods are restarted; ``status`` shows restarts and the last reason, ``down`` stops the supervisor
first.  The apiserver writes a narrow audit log (creates of pods, bindings and Jobs) so a run can
count what the apiserver itself accepted, across restarts of any component.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import ssl
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from hollowscale.cluster.binaries import Binaries, binaries
from hollowscale.cluster.pki import ClusterPKI, create_pki
from hollowscale.cluster.profiles import Profile, get_profile
from hollowscale.cluster.supervisor import ComponentSpec, ComponentState, add_component, component_states
from hollowscale.cluster.supervisor import read_events as read_supervisor_events
from hollowscale.cluster.supervisor import request as supervisor_request
from hollowscale.versions import ETCD_VERSION, KUBERNETES_VERSION
from kubecore.procs import ProcessRecord, failure_reason, free_ports, port_in_use, spawn, stop
from kubecore.procs import record as process_record
from kubecore.tls import client_ssl_context

DEFAULT_DIR = Path(".hollowscale/cluster")
REPO = Path(__file__).resolve().parents[2]
COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler")
SERVICE_CIDR = "10.0.0.0/24"
#: the apiserver's audit policy: only what a run counts (creates of pods, bindings and Jobs), metadata only
AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived", "ResponseStarted"],
    "rules": [
        {"level": "Metadata", "verbs": ["create"],
         "resources": [{"group": "", "resources": ["pods", "pods/binding"]}, {"group": "batch", "resources": ["jobs"]}]},
        {"level": "None"},
    ],
}
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


class LocalCluster:
    """A local control plane in ``dir``.

    Args:
        dir: cluster directory (created by ``up``, removed by ``down``).
        profile: ``default`` (upstream limits) or ``scale`` (limits lifted).
        apiserver_port: fixed kube-apiserver port, or 0 for a free one.
        bins: binaries to run (default: the cached ones of the pinned versions).
    """

    def __init__(self, dir: Path = DEFAULT_DIR, profile: str = "default", apiserver_port: int = 0,
                 bins: Binaries | None = None) -> None:
        self.dir = Path(dir).absolute()
        self.profile: Profile = get_profile(profile)
        self.apiserver_port = apiserver_port
        self.bins = bins or binaries()

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

    def _audit_policy(self) -> Path:
        path = self.dir / "audit-policy.yaml"
        path.write_text(yaml.safe_dump(AUDIT_POLICY, sort_keys=False))
        return path

    # ----------------------------------------------------------------- state
    def _load_state(self) -> _State | None:
        try:
            raw = json.loads(self.state_path.read_text())
        except FileNotFoundError:
            return None
        except (json.JSONDecodeError, OSError) as exc:
            raise ClusterError(f"{self.state_path} is unreadable ({exc}); remove {self.dir} by hand") from None
        return _State(**raw)

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
        profile = get_profile(state.profile)
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
            metrics={
                "apiserver": f"https://127.0.0.1:{ports['kube-apiserver']}/metrics",
                "controller-manager": f"https://127.0.0.1:{ports['kube-controller-manager']}/metrics",
                "scheduler": f"https://127.0.0.1:{ports['kube-scheduler']}/metrics",
                "etcd": f"http://127.0.0.1:{ports['etcd-metrics']}/metrics",
            },
            pids={**{p["name"]: p["pid"] for p in state.processes},
                  **{n: c.pid for n, c in component_states(self.dir).items()}},
            client_qps=profile.client_qps(),
            flags=state.flags,
            ports=dict(ports),
            started_at=state.started_at,
            reused=reused,
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
        existing = self._load_state()
        if existing is not None:
            statuses = self.status()
            dead = [s.name for s in statuses if not s.alive and s.state != "backoff"]
            if existing.complete and not dead:
                say(f"cluster already running in {self.dir} (profile {existing.profile}); reusing it")
                return self._info(existing, reused=True)
            reason = (f"{', '.join(dead)} exited" if dead else "an earlier start did not finish")
            raise ClusterError(
                f"the cluster in {self.dir} is degraded ({reason}); run `hollowscale cluster down "
                f"--dir {self.dir}` first"
            )
        missing = self.bins.missing()
        if missing:
            raise ClusterError(f"missing binary {missing[0]}; run `make setup` to build the control plane")
        if self.apiserver_port and port_in_use(self.apiserver_port):
            raise ClusterError(f"port {self.apiserver_port} on 127.0.0.1 is already in use; pick another "
                               "with --port or stop what listens there")
        try:
            return self._start(say, timeout_s)
        except BaseException:
            # Ctrl-C, a component that died, a timeout: leave nothing behind.
            self.down()
            raise

    def _start(self, say: ProgressFn, timeout_s: float) -> ClusterInfo:
        deadline = time.monotonic() + timeout_s
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "logs").mkdir(exist_ok=True)
        names = ["etcd", "etcd-peer", "etcd-metrics", "kube-apiserver", "kube-controller-manager",
                 "kube-scheduler"]
        ports = dict(zip(names, free_ports(len(names)), strict=True))
        if self.apiserver_port:
            ports["kube-apiserver"] = self.apiserver_port
        state = _State(profile=self.profile.name, ports=ports)
        self._save_state(state)
        say("generating certificates")
        pki = create_pki(self.dir / "pki")
        self._write_kubeconfigs(pki, ports["kube-apiserver"])
        # the supervisor imports hollowscale: make the checkout importable whether or not it is installed
        path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
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
        launch("etcd", self._etcd_argv(pki, ports))
        wait_for("etcd health", lambda: _get(f"http://127.0.0.1:{ports['etcd-metrics']}/health", None)[0] == 200)
        say("starting kube-apiserver")
        launch("kube-apiserver", self._apiserver_argv(pki, ports))
        wait_for("kube-apiserver /readyz", lambda: _get(f"{api}/readyz", ctx)[0] == 200)
        say("starting kube-controller-manager and kube-scheduler")
        launch("kube-controller-manager", self._controller_manager_argv(pki, ports))
        launch("kube-scheduler", self._scheduler_argv(pki, ports))
        wait_for("leader leases of scheduler and controller-manager",
                 lambda: _lease_held(api, ctx, "kube-scheduler") and _lease_held(api, ctx, "kube-controller-manager"))
        wait_for("the default ServiceAccount",
                 lambda: _get(f"{api}/api/v1/namespaces/default/serviceaccounts/default", ctx)[0] == 200)
        state.complete = True
        self._save_state(state)
        say(f"cluster ready at {api} (profile {self.profile.name})")
        return self._info(state, reused=False)

    # ----------------------------------------------------------------- down
    def down(self, grace_s: float = 10.0) -> list[str]:
        """Stop the supervisor first (it stops its components, newest first, also one in backoff),
        then anything recorded that still runs (by pid and start time), and remove the dir.

        Returns the names of the components that were still running.
        """
        state = self._load_state() if self.dir.exists() else None
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
        if self.dir.exists():
            shutil.rmtree(self.dir, ignore_errors=True)
        return stopped

    # ----------------------------------------------------------------- argv
    def _etcd_argv(self, pki: ClusterPKI, ports: dict[str, int]) -> list[str]:
        client = f"https://127.0.0.1:{ports['etcd']}"
        peer = f"http://127.0.0.1:{ports['etcd-peer']}"
        return [
            str(self.bins.etcd),
            "--name=hollowscale",
            f"--data-dir={self.dir / 'etcd'}",
            f"--listen-client-urls={client}",
            f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=hollowscale={peer}",
            "--initial-cluster-state=new",
            f"--listen-metrics-urls=http://127.0.0.1:{ports['etcd-metrics']}",
            f"--cert-file={pki.etcd_server.cert}",
            f"--key-file={pki.etcd_server.key}",
            f"--trusted-ca-file={pki.ca.cert}",
            "--client-cert-auth=true",
            "--quota-backend-bytes=8589934592",
            "--log-level=warn",
        ]

    def _apiserver_argv(self, pki: ClusterPKI, ports: dict[str, int]) -> list[str]:
        return [
            str(self.bins.kube_apiserver),
            f"--etcd-servers=https://127.0.0.1:{ports['etcd']}",
            f"--etcd-cafile={pki.ca.cert}",
            f"--etcd-certfile={pki.apiserver_etcd_client.cert}",
            f"--etcd-keyfile={pki.apiserver_etcd_client.key}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={ports['kube-apiserver']}",
            f"--tls-cert-file={pki.apiserver.cert}",
            f"--tls-private-key-file={pki.apiserver.key}",
            f"--client-ca-file={pki.ca.cert}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={pki.service_account_pub}",
            f"--service-account-signing-key-file={pki.service_account_key}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--authorization-mode=Node,RBAC",
            "--allow-privileged=true",
            # Loopback addresses are not valid Endpoints, so the `kubernetes` Service gets none:
            # nothing in this cluster reaches the apiserver through it (clients use the kubeconfig).
            "--endpoint-reconciler-type=none",
            f"--audit-policy-file={self._audit_policy()}",
            f"--audit-log-path={self.audit_log_path}",
            "--audit-log-format=json",
            f"--cert-dir={self.dir / 'pki' / 'apiserver-generated'}",
            *self.profile.apiserver_flags,
        ]

    def _secure_serving(self, component: str, port: int, kubeconfig: Path) -> list[str]:
        return [
            "--bind-address=127.0.0.1",
            f"--secure-port={port}",
            f"--cert-dir={self.dir / 'pki' / component}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            # Prometheus scrapes these without credentials; everything else stays authorised.
            "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
        ]

    def _controller_manager_argv(self, pki: ClusterPKI, ports: dict[str, int]) -> list[str]:
        kubeconfig = self.dir / "controller-manager.kubeconfig"
        return [
            str(self.bins.kube_controller_manager),
            f"--kubeconfig={kubeconfig}",
            *self._secure_serving("kube-controller-manager", ports["kube-controller-manager"], kubeconfig),
            f"--service-account-private-key-file={pki.service_account_key}",
            f"--root-ca-file={pki.ca.cert}",
            f"--cluster-signing-cert-file={pki.ca.cert}",
            f"--cluster-signing-key-file={pki.ca.key}",
            "--use-service-account-credentials=true",
            "--leader-elect=true",
            f"--kube-api-qps={self.profile.controller_manager_qps:g}",
            f"--kube-api-burst={self.profile.controller_manager_burst}",
        ]

    def _scheduler_argv(self, pki: ClusterPKI, ports: dict[str, int]) -> list[str]:
        kubeconfig = self.dir / "scheduler.kubeconfig"
        config = self.dir / "scheduler-config.yaml"
        config.write_text(yaml.safe_dump({
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "clientConnection": {"kubeconfig": str(kubeconfig), "qps": self.profile.scheduler_qps,
                                 "burst": self.profile.scheduler_burst},
            "leaderElection": {"leaderElect": True},
        }))
        return [
            str(self.bins.kube_scheduler),
            f"--config={config}",
            *self._secure_serving("kube-scheduler", ports["kube-scheduler"], kubeconfig),
        ]

    # ----------------------------------------------------------------- kubeconfigs
    def _write_kubeconfigs(self, pki: ClusterPKI, apiserver_port: int) -> None:
        server = f"https://127.0.0.1:{apiserver_port}"
        write_kubeconfig(self.kubeconfig_path, server, pki.ca.cert, pki.admin.cert, pki.admin.key,
                         user="kubernetes-admin", embed=True)
        write_kubeconfig(self.dir / "controller-manager.kubeconfig", server, pki.ca.cert,
                         pki.controller_manager.cert, pki.controller_manager.key, user="kube-controller-manager")
        write_kubeconfig(self.dir / "scheduler.kubeconfig", server, pki.ca.cert, pki.scheduler.cert,
                         pki.scheduler.key, user="kube-scheduler")


def write_kubeconfig(path: Path, server: str, ca: Path, cert: Path, key: Path, user: str,
                     embed: bool = False) -> None:
    """Write a one-context kubeconfig (file paths, or embedded data when ``embed``)."""

    def ref(name: str, file: Path) -> dict[str, str]:
        if embed:
            return {f"{name}-data": base64.b64encode(file.read_bytes()).decode()}
        return {name: str(file)}

    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "hollowscale", "cluster": {"server": server, **ref("certificate-authority", ca)}}],
        "users": [{"name": user, "user": {**ref("client-certificate", cert), **ref("client-key", key)}}],
        "contexts": [{"name": "hollowscale", "context": {"cluster": "hollowscale", "user": user}}],
        "current-context": "hollowscale",
    }
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    os.chmod(path, 0o600)


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
