"""Record a real run's metric snapshots as an attribution test case (tests/fixtures/attribution/<case>/).

Runs a scenario (its ``cluster.dir`` names the local cluster the run starts or reuses) through the
orchestrator; beside it, as a plan point does, the components' own ``/metrics`` and ``/proc/stat`` are
read ``--warmup-s`` after the load starts and when it ends (:class:`hollowscale.plan.scrape.WindowWatch`).
The two reads, filtered to what attribution reads, and ``window.json`` are copied into the case's folder
with ``source.json`` (the scenario, the command, the machine and the ranked limits it gave)::

    .venv/bin/python tests/bench/record_attribution.py SCENARIO CASE [--warmup-s 60]
        [--cpu-quota scheduler=0.3]

``--cpu-quota COMPONENT=CORES`` puts that component of the local cluster, once the load starts, into a
cgroup-v1 CPU quota of its own (what a kubelet gives a container with that CPU limit): a way to make one
component the first to saturate on this shared 2-core machine; ``window.json`` carries the limit
(``cpu_limits``, which attribution measures that component's CPU against) and ``source.json`` says so.
A plan point records the same files (``<point>/attribution/``): copy one of those instead when a plan
already produced the case.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from machine import machine_facts  # noqa: E402

from hollowscale.plan.points import point_attribution  # noqa: E402
from hollowscale.plan.scrape import LocalClusterScraper, WindowWatch  # noqa: E402
from hollowscale.run.orchestrator import Runner  # noqa: E402
from hollowscale.run.times import RunTimes  # noqa: E402
from hollowscale.scenario import load_scenario  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures" / "attribution"
CGROUP = Path("/sys/fs/cgroup/cpu")
PERIOD_US = 100_000
#: ClusterInfo.pids names
PIDS = {"scheduler": "kube-scheduler", "controller-manager": "kube-controller-manager", "apiserver": "kube-apiserver",
        "etcd": "etcd", "kueue": "kueue"}


class Quota(threading.Thread):
    """Once the load starts, move ``component`` of the cluster into a cgroup with ``cores`` of CPU."""

    def __init__(self, scraper: LocalClusterScraper, times: RunTimes, component: str, cores: float):
        super().__init__(daemon=True, name="quota")
        self.scraper, self.times, self.component, self.cores = scraper, times, component, cores
        self.path = CGROUP / f"hs-record-{os.getpid()}"
        self.pid: int | None = None
        self.stop_event = threading.Event()

    def run(self) -> None:
        while self.times.load_start is None and not self.stop_event.wait(0.2):
            pass
        if self.stop_event.is_set():
            return
        from hollowscale.cluster.local import LocalCluster

        info = LocalCluster(self.scraper.cluster_dir).info()
        if info is None:
            return
        self.pid = info.pids[PIDS[self.component]]
        self.path.mkdir(exist_ok=True)
        (self.path / "cpu.cfs_period_us").write_text(str(PERIOD_US))
        (self.path / "cpu.cfs_quota_us").write_text(str(int(self.cores * PERIOD_US)))
        (self.path / "cgroup.procs").write_text(str(self.pid))
        print(f"{self.component} (pid {self.pid}) held to {self.cores:g} core from the load's start", flush=True)

    def undo(self) -> None:
        self.stop_event.set()
        self.join(timeout=5)
        if self.path.exists():
            for pid in (self.path / "cgroup.procs").read_text().split():
                (CGROUP / "cgroup.procs").write_text(pid)
            self.path.rmdir()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("scenario", type=Path)
    ap.add_argument("case")
    ap.add_argument("--warmup-s", type=float, default=30.0)
    ap.add_argument("--cpu-quota", default="", help="COMPONENT=CORES (scheduler, controller-manager, apiserver, etcd)")
    ap.add_argument("--work", type=Path, default=Path("/tmp/hs-record-attribution"))
    args = ap.parse_args()
    sc = load_scenario(args.scenario)
    if not sc.cluster.dir:
        raise SystemExit(f"{args.scenario}: set cluster.dir (the cluster the run uses and the reads come from)")
    facts = machine_facts()
    runner = Runner(sc, args.work, quiet=True, run_id=f"record-{args.case}-{time.strftime('%H%M%S')}",
                    point_latest=False)
    scraper = LocalClusterScraper(Path(sc.cluster.dir))
    watch = WindowWatch(scraper, runner.times, args.warmup_s)
    quota = None
    if args.cpu_quota:
        comp, cores = args.cpu_quota.split("=")
        quota = Quota(scraper, runner.times, comp, float(cores))
        quota.start()
    watch.start()
    try:
        code = runner.run()
    finally:
        watch.stop()
        if quota is not None:
            quota.undo()
    caps = {quota.component: quota.cores} if quota is not None else None
    attribution = point_attribution(runner.run_dir, watch.first, watch.last, scraper.info, cpu_limits=caps)
    if attribution is None:
        print(f"run exited {code} without both reads of the window; nothing recorded", file=sys.stderr)
        return 1
    dest = FIXTURES / args.case
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(runner.run_dir / "attribution", dest)
    m = runner.summary.get("measurements") or {}
    source: dict[str, Any] = {
        "case": args.case, "recorded": facts["date"], "machine": facts["machine"], "versions": facts["versions"],
        "command": "tests/bench/record_attribution.py " + " ".join(sys.argv[1:]), "scenario": sc.to_dict(),
        "cpu_quota": args.cpu_quota or None, "run_exit": code, "run_dir": str(runner.run_dir),
        "pods_per_s": (m.get("scheduling_throughput_pods_per_s") or {}).get("avg"),
        "binding": attribution["binding"], "words": attribution["words"],
        "limits": [{k: x[k] for k in ("key", "pressure", "words")} for x in attribution["limits"]],
    }
    (dest / "source.json").write_text(json.dumps(source, indent=2, default=str) + "\n")
    print(f"recorded {dest}: {attribution['words']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
