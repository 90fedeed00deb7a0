"""``make bench-cluster``: how long ``cluster up`` (cached binaries) and ``down`` take.

Runs ``--runs`` full up/down cycles in fresh directories, checks after each ``down`` that no
component process and no listening port is left, and writes medians plus every run to JSON and
Markdown.  The figures are measured, never asserted: this is a benchmark, not a test.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from hollowscale.cluster.binaries import ensure_binaries
from hollowscale.cluster.local import LocalCluster
from kubecore.procs import port_in_use
from tests.bench.machine import machine_facts


def _running(pid: int) -> bool:
    """True if ``pid`` exists and is not a zombie."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def one_cycle(profile: str) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="hs-bench-cluster-") as tmp:
        local = LocalCluster(Path(tmp) / "c", profile=profile)
        started = time.monotonic()
        info = local.up(timeout_s=180)
        up_s = time.monotonic() - started
        started = time.monotonic()
        local.down()
        down_s = time.monotonic() - started
        leftover_pids = [p for p in info.pids.values() if _running(p)]
        leftover_ports = [p for p in info.ports.values() if port_in_use(p)]
        return {"up_s": round(up_s, 2), "down_s": round(down_s, 2), "leftover_pids": leftover_pids,
                "leftover_ports": leftover_ports}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="up/down cycles (median reported)")
    parser.add_argument("--profile", default="default", choices=["default", "scale"])
    parser.add_argument("--out", type=Path, default=Path("reports/bench/cluster.json"))
    args = parser.parse_args()
    ensure_binaries()
    runs = []
    for i in range(args.runs):
        run = one_cycle(args.profile)
        print(f"run {i + 1}/{args.runs}: up {run['up_s']}s, down {run['down_s']}s", flush=True)
        runs.append(run)
    ups = [float(r["up_s"]) for r in runs]  # type: ignore[arg-type]
    downs = [float(r["down_s"]) for r in runs]  # type: ignore[arg-type]
    result = {
        **machine_facts(),
        "command": f"make bench-cluster (tests/bench/bench_cluster.py --runs {args.runs} --profile {args.profile})",
        "profile": args.profile,
        "ready_means": "apiserver /readyz ok, default ServiceAccount exists, scheduler and "
                       "controller-manager hold their leader leases",
        "up_s_median": round(statistics.median(ups), 2),
        "down_s_median": round(statistics.median(downs), 2),
        "up_s_min": min(ups), "up_s_max": max(ups),
        "target_up_s": 20.0,
        "target_met": statistics.median(ups) <= 20.0,
        "clean_down": all(not r["leftover_pids"] and not r["leftover_ports"] for r in runs),
        "runs": runs,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    md = [
        "# cluster up/down (cached binaries)", "",
        f"{result['date']} on {result['machine']['cpu_model']} ({result['machine']['cores']} cores), "
        f"Kubernetes {result['versions']['kubernetes']}, etcd {result['versions']['etcd']}, profile {args.profile}", "",
        "| | median | min | max | target |", "|---|---|---|---|---|",
        f"| up to ready (s) | {result['up_s_median']} | {min(ups)} | {max(ups)} | <= 20 |",
        f"| down (s) | {result['down_s_median']} | {min(downs)} | {max(downs)} | |", "",
        f"No process or listening port left after down: {'yes' if result['clean_down'] else 'NO'}.", "",
        f"Command: `{result['command']}`", "",
    ]
    args.out.with_suffix(".md").write_text("\n".join(md))
    print(json.dumps({k: result[k] for k in ("up_s_median", "down_s_median", "clean_down")}))


if __name__ == "__main__":
    main()
