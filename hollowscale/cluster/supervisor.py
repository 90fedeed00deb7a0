"""The local cluster's supervisor: restarts a component that exits, as the kubelet restarts a static pod.

A scale test pushes the control plane until it stalls; a stalled apiserver makes the scheduler and the
controller-manager lose their leader leases, and both exit by design.  In a real cluster the kubelet
restarts them within seconds; without a supervisor every pod created afterwards stays Pending forever.

One supervisor process per cluster directory (``python -m hollowscale.cluster.supervisor DIR``) is the
parent of every component, so it learns each exit code.  It talks to the rest of hollowscale through
files in ``DIR/supervisor/`` (no port, no extra protocol):

* ``components.json``: what to run (name, argv, log), appended to by ``LocalCluster.up`` in start
  order; a component is started as soon as it appears.
* ``status.json``: each component's pid and start time, state (``running``, ``backoff``, ``stalled``,
  ``stopped``), restarts, last exit code and reason, rewritten atomically on every change.
* ``events.jsonl``: one line per start, exit, restart, stall, resume, kill (the report's timeline).
* ``requests/*.json``: faults and restarts asked for by a scenario or ``hollowscale cluster fault``:
  ``stall`` (SIGSTOP for a duration, then SIGCONT), ``kill`` (SIGKILL; restarted with backoff like any
  crash), ``restart`` (SIGTERM, then started again at once: same argv, same data dir).

Backoff is the kubelet's crash-loop backoff: 10 s after the first exit, doubling to a 5-minute cap, and
reset once a component has run for 10 minutes.  SIGTERM to the supervisor stops every component
(newest first; a stalled one is continued first so it can exit) and then the supervisor itself.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kubecore.procs import ProcessRecord, failure_reason, spawn, stop_group
from kubecore.procs import record as process_record

SUPERVISOR_DIR = "supervisor"
ACTIONS = ("stall", "kill", "restart")
#: a requested restart waits this long for a graceful exit, then SIGKILLs (the kubelet's default grace)
RESTART_GRACE_S = 30.0


@dataclass(frozen=True)
class BackoffPolicy:
    """Crash-loop backoff, in seconds (the kubelet's: 10 s doubling, 5 min cap, reset after 10 min up)."""

    initial_s: float = 10.0
    cap_s: float = 300.0
    reset_after_s: float = 600.0

    def delay(self, consecutive_crashes: int) -> float:
        """Wait before the restart that follows the ``consecutive_crashes``-th exit in a row (1-based)."""
        if consecutive_crashes <= 0:
            return 0.0
        return min(self.initial_s * 2 ** (consecutive_crashes - 1), self.cap_s)

    @staticmethod
    def from_env() -> BackoffPolicy:
        """The policy, with ``HOLLOWSCALE_BACKOFF_INITIAL_S`` / ``_CAP_S`` overriding the kubelet's values."""
        return BackoffPolicy(initial_s=float(os.environ.get("HOLLOWSCALE_BACKOFF_INITIAL_S", 10.0)),
                             cap_s=float(os.environ.get("HOLLOWSCALE_BACKOFF_CAP_S", 300.0)))


@dataclass(frozen=True)
class ComponentSpec:
    """One supervised process: its name, exact command line and log file."""

    name: str
    argv: list[str]
    log: str
    cwd: str | None = None


@dataclass
class ComponentState:
    """What ``status.json`` says of one component."""

    name: str
    pid: int = 0
    start_ticks: int = -1
    state: str = "starting"  # running | backoff | stalled | stopped
    started_at: float = 0.0
    starts: int = 0
    restarts: int = 0
    consecutive_crashes: int = 0
    last_exit_code: int | None = None
    last_exit_at: float | None = None
    last_reason: str = ""
    next_start_at: float | None = None
    stalled_until: float | None = None

    def record(self) -> ProcessRecord:
        return ProcessRecord(self.name, self.pid, self.start_ticks)


def paths(cluster_dir: Path) -> dict[str, Path]:
    """The supervisor's files under a cluster directory."""
    d = Path(cluster_dir) / SUPERVISOR_DIR
    return {"dir": d, "components": d / "components.json", "status": d / "status.json",
            "events": d / "events.jsonl", "requests": d / "requests", "log": Path(cluster_dir) / "logs" / "supervisor.log"}


def _write_json(path: Path, doc: Any) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(doc, indent=2))
    os.replace(tmp, path)


def exit_text(code: int | None) -> str:
    """``exit code 1`` / ``killed by SIGKILL`` for a Popen return code."""
    if code is None:
        return "running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def _log_tail(log: Path, lines: int = 5) -> list[str]:
    try:
        with log.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - 8192))
            text = fh.read().decode(errors="replace")
    except OSError:
        return []
    return [ln.strip()[:300] for ln in text.splitlines() if ln.strip()][-lines:]


# ------------------------------------------------------------------------------------------ clients
def add_component(cluster_dir: Path, spec: ComponentSpec) -> None:
    """Append ``spec`` to what the supervisor runs (it starts the component within ~0.1 s)."""
    p = paths(cluster_dir)
    p["dir"].mkdir(parents=True, exist_ok=True)
    specs = load_specs(cluster_dir)
    if any(s.name == spec.name for s in specs):
        raise ValueError(f"component {spec.name} is already supervised")
    _write_json(p["components"], [asdict(s) for s in [*specs, spec]])


def load_specs(cluster_dir: Path) -> list[ComponentSpec]:
    try:
        return [ComponentSpec(**d) for d in json.loads(paths(cluster_dir)["components"].read_text())]
    except FileNotFoundError:
        return []


def read_status(cluster_dir: Path) -> dict[str, Any]:
    """The supervisor's last ``status.json`` (``{}`` before it wrote one)."""
    try:
        doc: dict[str, Any] = json.loads(paths(cluster_dir)["status"].read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}
    return doc


def component_states(cluster_dir: Path) -> dict[str, ComponentState]:
    return {name: ComponentState(**c) for name, c in (read_status(cluster_dir).get("components") or {}).items()}


def read_events(cluster_dir: Path) -> list[dict[str, Any]]:
    """Every event so far (start, exit, restart, stall, resume, kill), oldest first."""
    try:
        text = paths(cluster_dir)["events"].read_text()
    except FileNotFoundError:
        return []
    out = []
    for line in text.splitlines():
        with contextlib.suppress(json.JSONDecodeError):
            out.append(json.loads(line))
    return out


def request(cluster_dir: Path, action: str, component: str, duration_s: float = 0.0,
            timeout_s: float = 10.0) -> dict[str, Any]:
    """Ask the supervisor to ``stall``/``kill``/``restart`` a component; returns its acknowledgement event.

    Raises:
        ValueError: unknown action or component.
        TimeoutError: the supervisor did not acknowledge in ``timeout_s`` (it is not running).
    """
    if action not in ACTIONS:
        raise ValueError(f"unknown action {action!r}; expected one of {', '.join(ACTIONS)}")
    names = [s.name for s in load_specs(cluster_dir)]
    if component not in names:
        raise ValueError(f"no supervised component {component!r}; expected one of {', '.join(names) or '(none)'}")
    p = paths(cluster_dir)
    p["requests"].mkdir(parents=True, exist_ok=True)
    rid = uuid.uuid4().hex[:12]
    _write_json(p["requests"] / f"{time.time():.6f}-{rid}.json",
                {"id": rid, "action": action, "component": component, "duration_s": duration_s})
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for ev in reversed(read_events(cluster_dir)):
            if ev.get("request") == rid:
                return ev
        time.sleep(0.05)
    raise TimeoutError(f"the supervisor of {cluster_dir} did not acknowledge {action} {component} in {timeout_s:g}s")


# ------------------------------------------------------------------------------------------ the process
@dataclass
class _Running:
    spec: ComponentSpec
    state: ComponentState
    proc: subprocess.Popen[bytes] | None = None
    restart_requested: str | None = None  # request id of a pending restart
    term_sent_at: float | None = None


@dataclass
class Supervisor:
    """The supervising loop (run by ``main``; one per cluster directory)."""

    cluster_dir: Path
    policy: BackoffPolicy = field(default_factory=BackoffPolicy)
    poll_s: float = 0.1
    stop_grace_s: float = 10.0
    running: dict[str, _Running] = field(default_factory=dict)
    _order: list[str] = field(default_factory=list)
    _stopping: bool = False
    _specs_mtime: float = -1.0

    def __post_init__(self) -> None:
        self.p = paths(self.cluster_dir)
        self.p["dir"].mkdir(parents=True, exist_ok=True)
        self.p["requests"].mkdir(exist_ok=True)

    # ---- bookkeeping
    def event(self, component: str, event: str, **extra: Any) -> None:
        doc = {"t": round(time.time(), 3), "component": component, "event": event, **extra}
        with self.p["events"].open("a") as fh:
            fh.write(json.dumps(doc) + "\n")
        print(json.dumps(doc), flush=True)

    def save(self) -> None:
        _write_json(self.p["status"], {"pid": os.getpid(), "updated": round(time.time(), 3),
                                       "stopping": self._stopping,
                                       "policy": asdict(self.policy),
                                       "components": {n: asdict(self.running[n].state) for n in self._order}})

    # ---- lifecycle of one component
    def _start(self, r: _Running, why: str) -> None:
        r.proc = spawn(list(r.spec.argv), Path(r.spec.log), cwd=Path(r.spec.cwd) if r.spec.cwd else None)
        rec = process_record(r.spec.name, r.proc)
        s = r.state
        if s.starts:
            s.restarts += 1
        s.starts += 1
        s.pid, s.start_ticks, s.started_at = rec.pid, rec.start_ticks, time.time()
        s.state, s.next_start_at, s.stalled_until = "running", None, None
        r.term_sent_at = None
        self.event(r.spec.name, "started", pid=rec.pid, why=why, restarts=s.restarts)

    def _on_exit(self, r: _Running, code: int) -> None:
        s = r.state
        now = time.time()
        ran_s = now - s.started_at
        tail = _log_tail(Path(r.spec.log))
        s.last_exit_code, s.last_exit_at = code, now
        # a signal is its own reason (the last error line in the log predates it); an exit code is not
        s.last_reason = exit_text(code) if code < 0 else f"{exit_text(code)}: {failure_reason(Path(r.spec.log))}"
        r.proc = None
        if self._stopping:
            s.state = "stopped"
            self.event(r.spec.name, "stopped", code=code, ran_s=round(ran_s, 3))
            return
        if r.restart_requested is not None:
            rid, r.restart_requested = r.restart_requested, None
            shutdown = time.monotonic() - r.term_sent_at if r.term_sent_at is not None else None
            self.event(r.spec.name, "exited", code=code, exit=exit_text(code), ran_s=round(ran_s, 3),
                       requested=True, shutdown_s=round(shutdown, 3) if shutdown is not None else None,
                       log_tail=tail)
            self._start(r, why=f"restart requested ({rid})")
            return
        if ran_s >= self.policy.reset_after_s:
            s.consecutive_crashes = 0
        s.consecutive_crashes += 1
        delay = self.policy.delay(s.consecutive_crashes)
        s.state, s.next_start_at = "backoff", now + delay
        self.event(r.spec.name, "exited", code=code, exit=exit_text(code), ran_s=round(ran_s, 3),
                   reason=s.last_reason, log_tail=tail, restart_in_s=delay)

    # ---- requests
    def _requests(self) -> bool:
        """Act on pending requests; True when any was handled."""
        handled = False
        for path in sorted(self.p["requests"].glob("*.json")):
            try:
                req = json.loads(path.read_text())
            except (OSError, json.JSONDecodeError):
                continue
            path.unlink(missing_ok=True)
            handled = True
            rid, action, name = req.get("id"), req.get("action"), req.get("component")
            r = self.running.get(str(name))
            if r is None or action not in ACTIONS:
                self.event(str(name), "request-refused", request=rid, action=action, why="unknown component or action")
                continue
            if r.proc is None or r.proc.poll() is not None:
                self.event(r.spec.name, "request-refused", request=rid, action=action,
                           why=f"not running (state {r.state.state})")
                continue
            pid = r.proc.pid
            if action == "stall":
                duration = float(req.get("duration_s") or 0.0)
                os.kill(pid, signal.SIGSTOP)
                r.state.state, r.state.stalled_until = "stalled", time.time() + duration
                self.event(r.spec.name, "stalled", request=rid, pid=pid, duration_s=duration)
            elif action == "kill":
                self._continue(r)
                os.kill(pid, signal.SIGKILL)
                self.event(r.spec.name, "killed", request=rid, pid=pid)
            else:  # restart
                self._continue(r)
                r.restart_requested = str(rid)
                r.term_sent_at = time.monotonic()
                os.kill(pid, signal.SIGTERM)
                self.event(r.spec.name, "restarting", request=rid, pid=pid)
        return handled

    def _continue(self, r: _Running) -> None:
        if r.state.stalled_until is not None and r.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(r.proc.pid, signal.SIGCONT)
            r.state.stalled_until = None
            r.state.state = "running"
            self.event(r.spec.name, "resumed", pid=r.proc.pid)

    # ---- the loop
    def _load_new_specs(self) -> bool:
        try:
            mtime = self.p["components"].stat().st_mtime
        except FileNotFoundError:
            return False
        if mtime == self._specs_mtime:
            return False
        self._specs_mtime = mtime
        changed = False
        for spec in load_specs(self.cluster_dir):
            if spec.name not in self.running:
                r = _Running(spec, ComponentState(spec.name))
                self.running[spec.name] = r
                self._order.append(spec.name)
                self._start(r, why="cluster up")
                changed = True
        return changed

    def tick(self) -> None:
        changed = self._load_new_specs()
        now = time.time()
        for name in self._order:
            r = self.running[name]
            if r.proc is not None:
                code = r.proc.poll()
                if code is not None:
                    self._on_exit(r, code)
                    changed = True
                elif r.state.stalled_until is not None and now >= r.state.stalled_until:
                    self._continue(r)
                    changed = True
                elif r.term_sent_at is not None and time.monotonic() - r.term_sent_at > RESTART_GRACE_S:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(r.proc.pid, signal.SIGKILL)
            elif r.state.state == "backoff" and r.state.next_start_at is not None and now >= r.state.next_start_at:
                self._start(r, why=f"crash-loop backoff after {exit_text(r.state.last_exit_code)}")
                changed = True
        if self._requests():
            changed = True
        if changed or not self.p["status"].exists():
            self.save()

    def stop_all(self) -> None:
        """Stop every component, newest first (a stalled one is continued first so SIGTERM lands)."""
        self._stopping = True
        self.save()
        for name in reversed(self._order):
            r = self.running[name]
            if r.proc is None:
                r.state.state, r.state.next_start_at = "stopped", None
                continue
            self._continue(r)
            t0 = time.monotonic()
            code = stop_group(r.proc, self.stop_grace_s)
            self.event(name, "stop", took_s=round(time.monotonic() - t0, 3))
            self._on_exit(r, code if code is not None else -signal.SIGKILL)
            self.save()
        self.save()

    def run(self) -> None:
        def on_term(_sig: int, _frame: Any) -> None:
            self._stopping = True

        signal.signal(signal.SIGTERM, on_term)
        signal.signal(signal.SIGINT, on_term)
        self.save()
        while not self._stopping:
            self.tick()
            time.sleep(self.poll_s)
        self.stop_all()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0] in ("-h", "--help"):
        print("usage: python -m hollowscale.cluster.supervisor CLUSTER_DIR\n\n"
              "Runs and restarts the components listed in CLUSTER_DIR/supervisor/components.json "
              "(started by `hollowscale cluster up`; not meant to be run by hand).")
        return 0 if args and args[0] in ("-h", "--help") else 2
    Supervisor(Path(args[0]).absolute(), policy=BackoffPolicy.from_env()).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
