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
from collections.abc import Callable
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


#: in a copy :func:`update_latest` made of a run folder (where links fail): that ``latest`` is ours to replace
LATEST_COPY_MARKER = ".hollowscale-latest-copy"


def update_latest(reports_root: Path, run_dir: Path, warn: Callable[[str], None] | None = None) -> Path | None:
    """Point ``<reports_root>/latest`` at ``run_dir`` (a relative symlink; a copy where links fail).

    Only a ``latest`` of ours is replaced (:func:`latest_is_ours`): a file, a folder or a link elsewhere
    that someone else made under that name is left as it is, ``warn`` is told why (default: one line on
    stderr) and None is returned; the run's own folder is not affected either way.
    """
    latest = reports_root / "latest"
    if not latest_is_ours(latest, reports_root):
        what = "a folder" if latest.is_dir() and not latest.is_symlink() else \
            "a link outside the reports folder" if latest.is_symlink() else "a file"
        (warn or _warn)(f"{latest} is {what} hollowscale did not make: left as it is, not pointed at {run_dir}")
        return None
    tmp = reports_root / ".latest.tmp"
    try:
        if tmp.is_symlink() or tmp.exists():
            tmp.unlink()  # our own temp link (an interrupted earlier update)
        os.symlink(os.path.relpath(run_dir, reports_root), tmp)
        os.replace(tmp, latest)
    except OSError:
        import shutil

        if latest.is_symlink():
            latest.unlink()
        elif latest.exists():
            shutil.rmtree(latest)  # a copy of ours (latest_is_ours checked its marker)
        shutil.copytree(run_dir, latest)
        (latest / LATEST_COPY_MARKER).write_text(f"a copy of {run_dir} made by hollowscale (links failed here)\n")
    return latest


def latest_is_ours(latest: Path, reports_root: Path) -> bool:
    """Whether ``latest`` may be replaced: absent, a relative link that stays inside ``reports_root`` (what
    :func:`update_latest` writes), or a copy it made (holding :data:`LATEST_COPY_MARKER`)."""
    if latest.is_symlink():
        target = os.readlink(latest)
        rel = os.path.normpath(target)
        return not os.path.isabs(target) and rel not in (".", "..") and not rel.startswith(".." + os.sep)
    if not latest.exists():
        return True
    return latest.is_dir() and (latest / LATEST_COPY_MARKER).is_file()


def _warn(message: str) -> None:
    import sys

    print(f"warning: {message}", file=sys.stderr, flush=True)
