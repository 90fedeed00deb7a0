"""Put a change's benchmark figures beside the ones committed before it: ``reports/bench/beside-<name>.{json,md}``.

Usage: ``python tests/bench/beside.py --before REV --name refactor`` after rerunning the benchmarks
(``make bench-cluster``, ``bench-loadgen``, ``bench-distill``).  The old figures are read from git
(``REV:reports/bench/*.json``), the new ones from the working tree; each row gives both and the ratio
new/old, so "the change cost nothing measurable" is a table, not a claim.  Absolute times on a
shared 2-core machine move with its load: the load averages of both runs are in the file, and the
CPU-normalised figures (distillation samples per student CPU-second) are the steadiest.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "reports" / "bench"
sys.path.insert(0, str(Path(__file__).resolve().parent))

from portable import portable  # noqa: E402

#: (file, label, path into the JSON, unit, better: "lower" | "higher")
FIGURES: list[tuple[str, str, str, str, str]] = [
    ("cluster", "cluster up to ready, median", "up_s_median", "s", "lower"),
    ("cluster", "cluster down, median", "down_s_median", "s", "lower"),
    ("loadgen", "Job creates/s, one Locust process", "locust.creates_per_s", "1/s", "higher"),
    ("loadgen", "Locust CPU average", "locust.cpu_cores_avg", "cores", "lower"),
    ("loadgen", "create latency p50 (Locust)", "locust.create_p50_ms", "ms", "lower"),
    ("loadgen", "collector peak events/s applied", "collector.peak_events_per_s", "1/s", "higher"),
    ("loadgen", "collector apply lag max", "collector.apply_lag_ms_max", "ms", "lower"),
    ("loadgen", "collector replay, one thread", "collector.replay_events_per_s_one_thread", "1/s", "higher"),
]
DISTILL_ROWS = ("pure", "same-net", "service-1", "service-2", "service-4", "service-2-kill")


def _get(doc: Any, path: str) -> float | None:
    for part in path.split("."):
        if not isinstance(doc, dict) or part not in doc:
            return None
        doc = doc[part]
    return float(doc) if isinstance(doc, int | float) and not isinstance(doc, bool) else None


def _old(rev: str, name: str) -> dict[str, Any] | None:
    r = subprocess.run(["git", "show", f"{rev}:reports/bench/{name}.json"], cwd=ROOT, capture_output=True, text=True)
    return json.loads(r.stdout) if r.returncode == 0 else None


def _new(name: str) -> dict[str, Any] | None:
    path = BENCH / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def _date(doc: dict[str, Any] | None) -> str | None:
    if not doc:
        return None
    return str(doc.get("date") or doc.get("when") or "") or None


def _load(doc: dict[str, Any] | None) -> Any:
    if not doc:
        return None
    machine = doc.get("machine") or {}
    return machine.get("load_average_1_5_15") or doc.get("loadavg_1m")


def rows(rev: str, reruns: dict[str, dict[str, Any]] | None = None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Figure rows (old, new, ratio; and the old code rerun today where given) and the run metadata."""
    reruns = reruns or {}
    docs = {n: (_old(rev, n), _new(n)) for n in ("cluster", "loadgen", "distill")}
    out: list[dict[str, Any]] = []
    for name, label, path, unit, better in FIGURES:
        old, new = docs[name]
        row = _row(name, label, unit, better, _get(old, path), _get(new, path))
        if name in reruns:
            again = _get(reruns[name], path)
            row["before_rerun"] = again
            row["ratio_after_before_rerun"] = round(row["after"] / again, 3) if again and row["after"] is not None \
                else None
        out.append(row)
    old_d, new_d = docs["distill"]
    for row in DISTILL_ROWS:
        o = next((r for r in (old_d or {}).get("rows", []) if r.get("row") == row), None)
        n = next((r for r in (new_d or {}).get("rows", []) if r.get("row") == row), None)
        out.append(_row("distill", f"{row}: samples/s", "1/s", "higher", _get(o, "samples_per_s"),
                        _get(n, "samples_per_s")))
        out.append(_row("distill", f"{row}: samples per student CPU-s", "1/CPU-s", "higher",
                        _get(o, "samples_per_student_cpu_s"), _get(n, "samples_per_student_cpu_s")))
        out.append(_row("distill", f"{row}: accuracy mean", "fraction", "higher", _get(o, "accuracy_mean"),
                        _get(n, "accuracy_mean")))
    meta = {bench: {"before": {"date": _date(o), "load": _load(o), "command": (o or {}).get("command")},
                    "after": {"date": _date(n), "load": _load(n), "command": (n or {}).get("command")}}
            for bench, (o, n) in docs.items()}
    for bench, doc in reruns.items():
        meta[bench]["before_rerun"] = {"date": _date(doc), "load": _load(doc), "command": doc.get("command")}
    return out, meta


def _row(bench: str, label: str, unit: str, better: str, old: float | None, new: float | None) -> dict[str, Any]:
    ratio = round(new / old, 3) if old and new is not None else None
    return {"bench": bench, "figure": label, "unit": unit, "better": better, "before": old, "after": new,
            "ratio_after_before": ratio}


def render(name: str, rev: str, table: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    lines = [f"# Benchmarks before and after: {name}", "",
             f"Before: the figures committed at `{rev}`; after: this working tree's `reports/bench/*.json`.",
             "Ratio = after / before (for 'lower is better' figures a ratio < 1 is an improvement).", "",
             "'before, rerun' is the old revision run again on the same day as 'after', side by side.", "",
             "| bench | figure | unit | before | before, rerun | after | after/before | after/rerun | better |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in table:
        lines.append(f"| {r['bench']} | {r['figure']} | {r['unit']} | {_fmt(r['before'])} | "
                     f"{_fmt(r.get('before_rerun'))} | {_fmt(r['after'])} | {_fmt(r['ratio_after_before'])} | "
                     f"{_fmt(r.get('ratio_after_before_rerun'))} | {r['better']} |")
    lines += ["", "| bench | run | date | load average | command |", "|---|---|---|---|---|"]
    for bench, m in meta.items():
        for when in ("before", "before_rerun", "after"):
            if when not in m:
                continue
            lines.append(f"| {bench} | {when} | {m[when]['date']} | {m[when]['load']} | `{m[when]['command']}` |")
    return "\n".join(lines) + "\n"


def _fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:g}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True, help="git revision whose reports/bench/*.json are the old figures")
    ap.add_argument("--name", required=True, help="what changed (file name: reports/bench/beside-NAME.*)")
    ap.add_argument("--rerun", action="append", default=[], metavar="BENCH=JSON",
                    help="the old revision's figures rerun on the same day (e.g. loadgen=/tmp/before/...json)")
    ap.add_argument("--note", action="append", default=[], help="a line of explanation for the markdown file")
    args = ap.parse_args()
    reruns = {k: json.loads(Path(v).read_text()) for k, v in (r.split("=", 1) for r in args.rerun)}
    table, meta = rows(args.before, reruns)
    doc = {"name": args.name, "before_rev": args.before, "written": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
           "command": " ".join(["python", "tests/bench/beside.py", *sys.argv[1:]]),
           "notes": args.note, "figures": table, "runs": meta}
    doc = portable(doc)  # the reruns' files and commands without this machine's folders
    table, meta = doc["figures"], doc["runs"]
    (BENCH / f"beside-{args.name}.json").write_text(json.dumps(doc, indent=2) + "\n")
    md = render(args.name, args.before, table, meta)
    if args.note:
        md += "\n## Notes\n\n" + "\n".join(f"- {n}" for n in args.note) + "\n"
    (BENCH / f"beside-{args.name}.md").write_text(md + f"\nCommand: `{doc['command']}`\n")
    print((BENCH / f"beside-{args.name}.md").read_text())


if __name__ == "__main__":
    main()
