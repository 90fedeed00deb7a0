"""``summary.json``: the run's figures, SLO verdicts and the sources behind each figure.

Fields required by DESIGN.md: ``schema_version``, ``scenario``, ``started_at``, ``duration_s``,
``cluster`` {``backend``, ``kubernetes_version``, ``nodes_ready``, ``gpus_total``}, ``measurements``
{``pod_startup_latency_ms``, ``scheduling_throughput_pods_per_s``, ``api_latency_ms``, ``jobs``},
``slos``, ``passed``.  Everything else is additive.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from hollowscale.scenario.model import SloSpec

SCHEMA_VERSION = 1
REQUIRED = ("schema_version", "scenario", "started_at", "duration_s", "cluster", "measurements", "slos", "passed")


def lookup(measurements: dict[str, Any], metric: str) -> float | None:
    """Value at a dotted path of ``measurements`` (None when absent or not a number)."""
    node: Any = measurements
    for part in metric.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    if isinstance(node, bool) or not isinstance(node, int | float):
        return None
    return None if isinstance(node, float) and math.isnan(node) else float(node)


def evaluate_slos(slos: tuple[SloSpec, ...] | list[SloSpec], measurements: dict[str, Any]) -> list[dict[str, Any]]:
    """One verdict per SLO; a missing value fails (no data is not a pass)."""
    out = []
    for s in slos:
        v = lookup(measurements, s.metric)
        passed = s.check(v)
        note = ""
        if v is None:
            # a latency percentile over zero requests: met vacuously, and said so; any other gap fails
            parent = s.metric.rsplit(".", 1)[0]
            samples = lookup(measurements, f"{parent}.count")
            if samples == 0 and s.op in ("<=", "<") and parent.startswith("api_latency"):
                passed, note = True, "not exercised: 0 requests of this kind in the window (vacuously met)"
            else:
                note = "no data for this metric in the run"
        out.append({
            "name": s.name,
            "metric": s.metric,
            "op": s.op,
            "threshold": s.threshold,
            "value": v,
            "passed": passed,
            "description": s.description or f"{s.metric} {s.op} {s.threshold:g}",
            "note": note,
        })
    return out


def finalize(summary: dict[str, Any], slos: tuple[SloSpec, ...] | list[SloSpec]) -> dict[str, Any]:
    summary["schema_version"] = SCHEMA_VERSION
    summary["slos"] = evaluate_slos(slos, summary.get("measurements") or {})
    summary["passed"] = bool(summary.get("complete", False)) and all(s["passed"] for s in summary["slos"])
    return summary


def _clean(o: Any) -> Any:
    if isinstance(o, float) and (math.isnan(o) or math.isinf(o)):
        return None
    if isinstance(o, dict):
        return {str(k): _clean(v) for k, v in o.items()}
    if isinstance(o, list | tuple):
        return [_clean(v) for v in o]
    if isinstance(o, Path):
        return str(o)
    return o


def write_json(path: Path, doc: Any) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(_clean(doc), indent=2, sort_keys=False) + "\n")
    os.replace(tmp, path)


def load_summary(run_dir: Path) -> dict[str, Any]:
    path = Path(run_dir) / "summary.json" if Path(run_dir).is_dir() else Path(run_dir)
    doc = json.loads(path.read_text())
    missing = [k for k in REQUIRED if k not in doc]
    if missing:
        raise ValueError(f"{path}: not a hollowscale summary (missing {', '.join(missing)})")
    return doc


def update_latest(reports_root: Path, run_dir: Path) -> Path:
    """Point ``<reports_root>/latest`` at ``run_dir`` (a relative symlink; a copy where links fail)."""
    latest = reports_root / "latest"
    tmp = reports_root / ".latest.tmp"
    try:
        if tmp.is_symlink() or tmp.exists():
            tmp.unlink()
        os.symlink(os.path.relpath(run_dir, reports_root), tmp)
        os.replace(tmp, latest)
    except OSError:
        import shutil

        if latest.is_symlink():
            latest.unlink()
        elif latest.exists():
            shutil.rmtree(latest)
        shutil.copytree(run_dir, latest)
    return latest
