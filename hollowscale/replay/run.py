"""A trace scenario run: every variant on a fresh local cluster, once per seed, then the comparison.

One replay, phase by phase (each phase's time goes to ``summary.json`` ``timings``):

1. ``sequence``: what is replayed (:func:`hollowscale.replay.modes.plan_replay`, the one place the mode
   picks its driver): the simulator's pod sequence for the seed (:func:`hollowscale.trace.paper.paper_sequence`),
   or a timed replay's schedule (:func:`hollowscale.replay.timed.timed_schedule`);
2. ``check``: a variant's scheduler configuration read by kube-scheduler itself
   (``--write-config-to``: it exits 1 on anything it refuses) before anything starts;
3. ``cluster``: a local control plane with the variant's scheduler configuration (and the user's own
   scheduler command, when the variant names one, started beside it);
4. ``objects``: the run's namespace, a priority class per QoS class, the GPU DeviceClass (DRA variants);
5. ``agents``: one hollow agent with every trace node as a node of its shape; every node Ready and,
   for DRA variants, every GPU node's ResourceSlice published;
6. ``replay``: the mode's driver behind :class:`hollowscale.replay.modes.ReplayRun`: the paper's protocol
   (:class:`hollowscale.replay.driver.PaperReplay`) or the time-faithful replay
   (:class:`hollowscale.replay.timed.TimedReplay`);
7. ``gather``: the API server's own allocation, the scheduler's metrics, CPU of the agent and the
   control plane, the figures (:mod:`hollowscale.replay.figures`);
8. ``teardown``: the agent (it deletes its nodes), the user's scheduler, the cluster.

A run folder holds ``summary.json``, ``summary.md``, ``pods.csv`` (one line per pod and verdict) and
the agent's and components' logs; the scenario's folder holds one per variant and seed (a timed
replay is deterministic: one per variant) and the comparison (:mod:`hollowscale.replay.report`).  Exit
code: 0 every replay complete and every check passed, 1 a check failed, 2 a replay incomplete, 130
interrupted.
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

import psutil
import requests
import yaml

from hollow.dra import GPU_CLASS, device_class
from hollow.process import AgentProcess, start_agent
from hollowscale.cluster.binaries import binaries
from hollowscale.cluster.local import ClusterInfo, LocalCluster
from hollowscale.paths import fresh_dir
from hollowscale.replay.api import ReplayApi
from hollowscale.replay.driver import apiserver_allocation
from hollowscale.replay.modes import ReplayRun, ReplayTarget, plan_replay
from hollowscale.replay.pods import priority_classes
from hollowscale.replay.report import modelled, write_comparison, write_run_markdown
from hollowscale.scenario.trace import TraceScenario, TraceVariantSpec
from hollowscale.timestamps import iso
from hollowscale.trace.frag import ClusterState, typical_shapes
from hollowscale.trace.nodes import REPLAY_NODE_KEY, node_map, trace_pools
from kubecore.config import load_endpoint
from kubecore.namespaces import claim_namespace
from kubecore.promtext import families
from kubecore.watch import session_for

EXIT_PASSED, EXIT_CHECK_FAILED, EXIT_INCOMPLETE, EXIT_INTERRUPTED = 0, 1, 2, 130
SCHEMA_VERSION = 1


class Interrupted(Exception):
    """SIGINT/SIGTERM during a replay."""


@dataclass
class RunResult:
    variant: str
    seed: int
    code: int
    run_dir: Path
    summary: dict[str, Any]


def check_scheduler_config(user: dict[str, Any], work: Path) -> str | None:
    """Have kube-scheduler read the configuration a variant would run with; its refusal, or None."""
    if not user:
        return None
    kubeconfig = work / "check.kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1", "insecure-skip-tls-verify": True}}],
        "users": [{"name": "u", "user": {"token": "check"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    config = work / "check-scheduler.yaml"
    config.write_text(yaml.safe_dump({"apiVersion": "kubescheduler.config.k8s.io/v1",
                                      "kind": "KubeSchedulerConfiguration",
                                      "clientConnection": {"kubeconfig": str(kubeconfig)},
                                      "leaderElection": {"leaderElect": False}, **user}))
    try:
        proc = subprocess.run([str(binaries().kube_scheduler), f"--config={config}",
                               f"--write-config-to={work / 'check-written.yaml'}"],
                              capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"kube-scheduler could not check the configuration: {exc}"
    if proc.returncode == 0:
        return None
    lines = [ln for ln in (proc.stderr or proc.stdout).splitlines() if "command failed" in ln or "err=" in ln]
    return (lines[-1] if lines else (proc.stderr or proc.stdout).strip()[-500:]) or f"exit {proc.returncode}"


def _cpu_s(pids: dict[str, int]) -> dict[str, float]:
    out = {}
    for name, pid in pids.items():
        try:
            t = psutil.Process(pid).cpu_times()
            out[name] = t.user + t.system
        except psutil.Error:
            continue
    return out


def _scheduler_metrics(url: str) -> dict[str, float]:
    """The scheduler's attempts by result and its attempt-duration histogram totals."""
    try:
        with warnings.catch_warnings():  # its self-signed loopback certificate: not verified, not warned about
            warnings.simplefilter("ignore")
            text = requests.get(url, verify=False, timeout=10).text
        fam = families(text)
    except (requests.RequestException, ValueError):
        return {}
    out: dict[str, float] = {}
    for labels, v in fam.get("scheduler_schedule_attempts_total", []):
        key = f"attempts_{labels.get('result', '?')}"
        out[key] = out.get(key, 0.0) + v
    for suffix in ("sum", "count"):
        out[f"attempt_duration_{suffix}"] = sum(v for _, v in fam.get(f"scheduler_scheduling_attempt_duration_seconds_"
                                                                       f"{suffix}", []))
    for labels, v in fam.get("scheduler_scheduling_attempt_duration_seconds_bucket", []):
        le = labels.get("le", "")
        out[f"attempt_duration_le_{le}"] = out.get(f"attempt_duration_le_{le}", 0.0) + v
    return out


def _metrics_delta(before: dict[str, float], after: dict[str, float]) -> dict[str, Any]:
    d = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in after}
    count = d.get("attempt_duration_count", 0.0)
    buckets = sorted(((float(k.rsplit("_", 1)[1]) if not k.endswith("+Inf") else float("inf"), v)
                      for k, v in d.items() if k.startswith("attempt_duration_le_")))
    p99 = next((le for le, n in buckets if count and n >= 0.99 * count), None)
    return {"attempts": {k.removeprefix("attempts_"): int(v) for k, v in d.items() if k.startswith("attempts_")},
            "attempt_duration_mean_ms": round(1000 * d.get("attempt_duration_sum", 0.0) / count, 3) if count else None,
            "attempt_duration_p99_le_ms": None if p99 is None or p99 == float("inf") else round(1000 * p99, 3),
            "source": "kube-scheduler /metrics: scheduler_schedule_attempts_total, "
                      "scheduler_scheduling_attempt_duration_seconds (delta over the replay; p99 as the bucket bound)"}


def _ready(node: dict[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (node.get("status") or {}).get("conditions") or ())


class _Phases:
    def __init__(self, log: Callable[[str], None]):
        self.timings: dict[str, float] = {}
        self.log = log
        self.name = ""
        self.t = time.monotonic()

    def __call__(self, name: str) -> None:
        now = time.monotonic()
        if self.name:
            self.timings[self.name] = round(now - self.t, 3)
        self.name, self.t = name, now
        if name != "done":
            self.log(f"  {name}")


def run_one(ts: TraceScenario, variant: TraceVariantSpec, seed: int, run_dir: Path, log: Callable[[str], None],
            stop: Callable[[], bool]) -> RunResult:
    """One replay of ``ts`` under ``variant`` with ``seed`` (module docstring); its summary in ``run_dir``."""
    run_dir.mkdir(parents=True, exist_ok=True)
    started = time.time()
    phase = _Phases(log)
    run_id = f"{ts.name}-{variant.name}-{seed}"[-56:].lstrip("-.").lower()
    spec = ts.spec
    gpu_mode = variant.gpu_mode
    errors: list[str] = []
    summary: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "scenario": ts.name, "variant": variant.name,
                               "seed": seed, "run_id": run_id, "started_at": iso(started), "gpu_mode": gpu_mode,
                               "complete": False}
    cluster: LocalCluster | None = None
    info: ClusterInfo | None = None
    agent: AgentProcess | None = None
    user_sched: subprocess.Popen[bytes] | None = None
    replay: ReplayRun | None = None
    code = EXIT_INCOMPLETE
    work = Path(tempfile.mkdtemp(prefix="hs-replay-"))
    try:
        phase("sequence")
        plan = plan_replay(ts, seed)
        summary["mode"] = spec.mode
        summary[plan.key] = plan.summary
        phase("check")
        user = ts.scheduler_configs.get(variant.name, {})
        refused = check_scheduler_config(user, work)
        if refused:
            raise RuntimeError(f"kube-scheduler refuses the configuration of variant {variant.name}: {refused}")
        phase("cluster")
        cluster = LocalCluster(work / "cp", profile=ts.file.cluster.profile, scheduler_config=user)
        info = cluster.up(timeout_s=180)
        scheduler_name = "default-scheduler"
        if variant.scheduler.command:
            scheduler_name = variant.scheduler.scheduler_name or scheduler_name
            argv = [a.replace("{kubeconfig}", str(info.kubeconfig)) for a in variant.scheduler.command]
            with (run_dir / "user-scheduler.log").open("ab") as out:
                user_sched = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)  # the variant's own scheduler
            time.sleep(3)
            if user_sched.poll() is not None:
                raise RuntimeError(f"the variant's scheduler command exited ({user_sched.returncode}); see "
                                   f"{run_dir / 'user-scheduler.log'}")
        endpoint = load_endpoint(info.kubeconfig)
        session = session_for(endpoint, 8)
        server = endpoint.server
        phase("objects")
        ns = claim_namespace(session, server, "trace-replay", run_id, log=log)
        for pc in priority_classes([p.qos for p in ts.trace.pods], run_id):
            session.post(f"{server}/apis/scheduling.k8s.io/v1/priorityclasses", json=pc).raise_for_status()
        if gpu_mode != "counted":
            r = session.post(f"{server}/apis/resource.k8s.io/v1/deviceclasses", json=device_class(GPU_CLASS))
            if r.status_code not in (201, 409):
                r.raise_for_status()
        phase("agents")
        pools = trace_pools(ts.trace, prefix="trace")
        pools_file = run_dir / "pools.yaml"
        pools_file.write_text(yaml.safe_dump({"pools": [p.doc(gpu_mode, isolate=run_id) for p in pools]}))
        agent = start_agent(info.kubeconfig, pools_file, run_dir / "agent.log", "--delete-nodes-on-exit",
                            timeout_s=120)
        total = len(ts.trace.nodes)
        gpu_nodes = sum(1 for n in ts.trace.nodes if n.gpus)
        deadline = time.monotonic() + 600
        while True:
            nodes = session.get(f"{server}/api/v1/nodes", params={"labelSelector": f"{REPLAY_NODE_KEY}={run_id}"},
                                timeout=60).json().get("items") or []
            ready = sum(1 for n in nodes if _ready(n))
            sliced = gpu_nodes if gpu_mode == "counted" else len({
                (s.get("spec") or {}).get("nodeName") for s in session.get(
                    f"{server}/apis/resource.k8s.io/v1/resourceslices", timeout=60).json().get("items") or []})
            if ready == total and sliced >= gpu_nodes:
                break
            if stop():
                raise Interrupted("before the replay")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{ready} of {total} nodes Ready, {sliced} of {gpu_nodes} GPU nodes with slices "
                                   "after 600 s")
            time.sleep(2)
        summary["cluster"] = {"backend": "local", "profile": ts.file.cluster.profile,
                              "kubernetes_version": info.kubernetes_version, "nodes_ready": ready,
                              "gpus_total": ts.trace.gpus, "scheduler_config": user or "kube-scheduler defaults",
                              "scheduler_name": scheduler_name}
        phase("replay")
        state = ClusterState(node_map(pools).items(), typical_shapes(ts.trace.pods))
        pids = {**{f"cluster:{k}": v for k, v in info.pids.items()}, "agent": agent.pid}
        cpu0 = _cpu_s(pids)
        metrics0 = _scheduler_metrics(info.metrics["scheduler"])
        replay = plan.start(ReplayTarget(ReplayApi(session, server, ns.name, run_id, gpu_mode, scheduler_name),
                                         state, log))
        replay.run(stop)
        cpu1 = _cpu_s(pids)
        metrics1 = _scheduler_metrics(info.metrics["scheduler"])
        phase("gather")
        api = apiserver_allocation(session, server, ns.name, run_id)
        figures = replay.figures(api)
        seconds = replay.seconds
        summary["replay"] = figures
        summary["scheduler_metrics"] = _metrics_delta(metrics0, metrics1)
        summary["resources"] = {"cpu_s": {k: round(cpu1[k] - cpu0[k], 2) for k in cpu1 if k in cpu0},
                                "cpu_cores": {k: round((cpu1[k] - cpu0[k]) / seconds, 3) for k in cpu1 if k in cpu0},
                                "source": "psutil cpu_times (user + system) of each process over the replay"}
        errors += replay.errors
        replay.write_pods_csv(run_dir / "pods.csv")
        stopped = stop() or not replay.complete
        summary["complete"] = not stopped
        checks = [c for c in figures["checks"].values() if c is not None]
        summary["passed"] = all(c["passed"] for c in checks)
        code = EXIT_INTERRUPTED if stop() else EXIT_INCOMPLETE if stopped else \
            EXIT_PASSED if summary["passed"] else EXIT_CHECK_FAILED
        if replay.errors:
            code = max(code, EXIT_INCOMPLETE) if code != EXIT_INTERRUPTED else code
    except Interrupted as exc:
        errors.append(f"interrupted {exc}")
        code = EXIT_INTERRUPTED
    except Exception as exc:  # the report says why; teardown follows
        errors.append(f"{exc.__class__.__name__}: {exc}")
        code = EXIT_INTERRUPTED if stop() else EXIT_INCOMPLETE
    finally:
        phase("teardown")
        if agent is not None:
            agent.stop()
        if user_sched is not None:
            user_sched.terminate()
            try:
                user_sched.wait(10)
            except subprocess.TimeoutExpired:
                user_sched.kill()
        if info is not None and cluster is not None:
            logs = Path(info.dir) / "logs"
            if logs.is_dir():
                (run_dir / "logs").mkdir(exist_ok=True)
                for f in logs.iterdir():
                    if f.is_file():
                        (run_dir / "logs" / f.name).write_bytes(f.read_bytes()[-2_000_000:])
        if cluster is not None:
            cluster.down()
        phase("done")
        summary["timings"] = phase.timings
        summary["duration_s"] = round(time.time() - started, 3)
        summary["errors"] = errors
        summary["modelled"] = modelled(gpu_mode, variant, ts)
        (run_dir / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
        write_run_markdown(run_dir / "summary.md", summary)
        with contextlib.suppress(OSError):
            for leftover in ("check.kubeconfig", "check-scheduler.yaml", "check-written.yaml"):
                (work / leftover).unlink(missing_ok=True)
            work.rmdir()  # only when empty: the cluster's own down() removed what it made
    return RunResult(variant.name, seed, code, run_dir, summary)


def run_seeds(ts: TraceScenario, given: list[int] | None = None) -> list[int]:
    """The seeds each variant runs with: those given, else the scenario's; a timed replay has no seed to vary
    (no shuffle, no tuning: deterministic), so it runs once, as seed 0."""
    if ts.spec.mode == "timed":
        return [0]
    return list(given or ts.spec.seeds)


def run_scenario(ts: TraceScenario, out_root: Path, variants: list[str] | None = None, seeds: list[int] | None = None,
                 log: Callable[[str], None] = print) -> tuple[int, Path, list[RunResult]]:
    """Every variant (or those named) with every seed (or those given), each on a fresh cluster; the
    comparison beside them.  Returns (exit code: the worst, parent folder, results)."""
    # a folder of its own, never one another replay started in the same second already writes into
    parent = fresh_dir(Path(out_root), f"{time.strftime('%Y%m%d-%H%M%S')}-{ts.name}")
    chosen = [v for v in ts.file.variants if not variants or v.name in variants]
    stopping = {"now": False}

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        stopping["now"] = True
        log(f"{signal.Signals(signum).name}: stopping after this pod (teardown follows)")

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    results: list[RunResult] = []
    try:
        if ts.spec.mode == "timed" and seeds:
            log(f"{ts.name}: a timed replay is deterministic: the seeds given ({', '.join(map(str, seeds))}) "
                "are not used; each variant runs once")
        for v in chosen:
            for seed in run_seeds(ts, seeds):
                if stopping["now"]:
                    break
                log(f"{ts.name}: variant {v.name}, " + ("timed" if ts.spec.mode == "timed" else f"seed {seed}"))
                folder = f"{v.name}-timed" if ts.spec.mode == "timed" else f"{v.name}-seed{seed}"
                results.append(run_one(ts, v, seed, parent / folder, log, lambda: stopping["now"]))
                log(f"  done: exit {results[-1].code} ({results[-1].run_dir})")
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    write_comparison(parent, ts, [(r.variant, r.seed, r.summary) for r in results])
    severity = {EXIT_PASSED: 0, EXIT_CHECK_FAILED: 1, EXIT_INCOMPLETE: 2, EXIT_INTERRUPTED: 3}
    code = max((r.code for r in results), key=lambda c: severity.get(c, 2), default=EXIT_INCOMPLETE)
    return code, parent, results


__all__ = ["EXIT_CHECK_FAILED", "EXIT_INCOMPLETE", "EXIT_INTERRUPTED", "EXIT_PASSED", "RunResult",
           "check_scheduler_config", "run_one", "run_scenario", "run_seeds"]
