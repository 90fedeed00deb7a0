#!/usr/bin/env python
"""Figures of runs made by two revisions, side by side: the check that a change of structure changed no
behaviour (issue 23: ``make scale-test``, the batch comparison, ``distill-e2e`` and the in-cluster run give
the same figures before and after, within noise).

Each ``--pair LABEL BEFORE AFTER`` names two ``summary.json`` files of the same scenario; the figures
compared are those every run has (jobs, pods, throughput, GPU allocation, latencies) plus those of its
features where present (batch, distillation).  Latencies on a shared 2-core machine move with its load
far more than with the code, so the file separates *outcomes* (what the scenario made happen: equal within
the arrival's randomness, or something changed) from *latencies* (read with the load beside them).

Usage:
    python tests/bench/compare_runs.py --name house --before-rev REV --after-rev REV \\
        --pair default B/summary.json A/summary.json [--pair ...] [--load LABEL "before 1.2 / after 0.9"] \\
        [--note TEXT]
Writes ``reports/bench/<name>.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from machine import machine_facts  # noqa: E402
from portable import portable  # noqa: E402

#: (dotted path in summary.json, kind) - kind "outcome" must agree within the arrival's randomness
FIGURES: tuple[tuple[str, str], ...] = (
    ("cluster.nodes_ready", "outcome"),
    ("measurements.jobs.submitted", "outcome"),
    ("measurements.jobs.completed", "outcome"),
    ("measurements.jobs.failed", "outcome"),
    ("measurements.jobs.unfinished", "outcome"),
    ("measurements.pods.created", "outcome"),
    ("measurements.gpu_allocation_pct.max", "outcome"),
    ("measurements.scheduling_throughput_pods_per_s.avg", "outcome"),
    ("measurements.batch.instances.total", "outcome"),
    ("measurements.batch.instances.unfinished", "outcome"),
    ("measurements.batch.deadlocked_jobs.count", "outcome"),
    ("measurements.distill.jobs", "outcome"),
    ("measurements.distill.failed_jobs", "outcome"),
    ("measurements.distill.lost_samples", "outcome"),
    ("measurements.integrity.jobs_lost", "outcome"),
    ("measurements.pod_startup_latency_ms.p50", "latency"),
    ("measurements.pod_startup_latency_ms.p99", "latency"),
    ("measurements.pod_scheduling_latency_ms.p99", "latency"),
    ("measurements.api_latency_slo_ms.mutating.p99", "latency"),
    ("passed", "verdict"),
    ("complete", "verdict"),
)


def lookup(doc: dict[str, Any], path: str) -> Any:
    for key in path.split("."):
        if not isinstance(doc, dict) or key not in doc:
            return None
        doc = doc[key]
    return doc


def ratio(before: Any, after: Any) -> float | None:
    if isinstance(before, bool) or isinstance(after, bool):
        return None
    if isinstance(before, int | float) and isinstance(after, int | float) and before:
        return round(after / before, 3)
    return None


def compare(label: str, before_path: Path, after_path: Path) -> dict[str, Any]:
    before, after = json.loads(before_path.read_text()), json.loads(after_path.read_text())
    rows = []
    for path, kind in FIGURES:
        b, a = lookup(before, path), lookup(after, path)
        if b is None and a is None:
            continue
        rows.append({"figure": path, "kind": kind, "before": b, "after": a, "after_over_before": ratio(b, a)})
    return {"label": label, "scenario": before.get("scenario"), "before": str(before_path), "after": str(after_path),
            "before_started_at": before.get("started_at"), "after_started_at": after.get("started_at"),
            "rows": rows}


def render(doc: dict[str, Any]) -> str:
    m = doc["machine"]
    lines = [f"# Runs before and after: {doc['name']}", "",
             f"Before: `{doc['before_rev']}`; after: `{doc['after_rev']}`. Written {doc['date']} on "
             f"{m['cpu_model']} ({m['cores']} cores, {m['memory_gib']} GiB), Kubernetes {doc['versions']}.", "",
             "Outcomes (counts, throughput, allocation) are what the scenario made happen (equal within the arrival's randomness unless behaviour "
             "changed); latencies move with the shared machine's load, given per pair.", ""]
    for pair in doc["pairs"]:
        lines += [f"## {pair['label']} (`{pair['scenario']}`)", "",
                  f"before started {pair['before_started_at']}, after {pair['after_started_at']}; load: "
                  f"{doc['loads'].get(pair['label'], 'not recorded')}", "",
                  "| figure | kind | before | after | after/before |", "|---|---|---|---|---|"]
        for r in pair["rows"]:
            lines.append(f"| `{r['figure']}` | {r['kind']} | {r['before']} | {r['after']} | "
                         f"{'' if r['after_over_before'] is None else r['after_over_before']} |")
        lines.append("")
    if doc["notes"]:
        lines += ["## Notes", ""] + [f"- {n}" for n in doc["notes"]] + [""]
    lines += ["Command: `" + doc["command"] + "`", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--name", required=True)
    ap.add_argument("--before-rev", required=True)
    ap.add_argument("--after-rev", required=True)
    ap.add_argument("--pair", nargs=3, action="append", required=True, metavar=("LABEL", "BEFORE", "AFTER"))
    ap.add_argument("--load", nargs=2, action="append", default=[], metavar=("LABEL", "TEXT"))
    ap.add_argument("--note", action="append", default=[])
    args = ap.parse_args(argv)
    facts = machine_facts()
    doc = {"name": args.name, "date": facts["date"], "machine": facts["machine"],
           "versions": facts["versions"]["kubernetes"],
           "before_rev": args.before_rev, "after_rev": args.after_rev,
           "pairs": [compare(label, Path(b), Path(a)) for label, b, a in args.pair],
           "loads": dict(args.load), "notes": args.note,
           "command": shlex.join(["python", "tests/bench/compare_runs.py", *(sys.argv[1:] if argv is None else argv)])}
    out = ROOT / "reports" / "bench"
    out.mkdir(parents=True, exist_ok=True)
    doc = portable(doc)  # the runs' folders relative to the repo or the temp folder: no machine path committed
    (out / f"{args.name}.json").write_text(json.dumps(doc, indent=2) + "\n")
    (out / f"{args.name}.md").write_text(render(doc))
    print(f"wrote {out / (args.name + '.json')} and .md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
