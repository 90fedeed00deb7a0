"""What the benches made of full runs share (``bench_topology.py``, ``bench_faults.py``): a trial is one
``hollowscale run`` of a scenario variant on a fresh cluster, recorded with its start, the commit its process
loaded and the load average; a variant's trials are added up to ``--repeats`` (``--extend`` keeps those already
in the file), and the file is written after each.

The agents, Locust and the cluster's supervisor are processes of their own, started per trial from the working
tree: while a bench runs, change nothing under ``hollow/``, ``loadgen/``, ``kubecore/`` or
``hollowscale/cluster/``, or its trials run code that no commit holds.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from portable import portable

from hollowscale.run.orchestrator import EXIT_INTERRUPTED, Runner
from hollowscale.scenario import Scenario

ROOT = Path(__file__).resolve().parents[2]


def get(d: Any, *path: str) -> Any:
    """The value at ``path`` in nested dicts, or None."""
    for p in path:
        d = d.get(p) if isinstance(d, dict) else None
    return d


def median(rows: list[dict[str, Any]], key: str) -> float | None:
    """The median of the rows' numeric ``key`` (3 places), or None when none has one."""
    vals = [r[key] for r in rows if isinstance(r.get(key), (int, float))]
    return round(statistics.median(vals), 3) if vals else None


def source_commit() -> str:
    """The commit the bench's process loaded (read once, at the start: a commit made while it runs is not the
    code it runs), so that trials added to a merged file by a later invocation say which code they ran."""
    out = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no", "--", ".",
                            ":!reports"], capture_output=True, text=True).stdout.strip()  # results are not code
    return (out.stdout.strip() or "unknown") + ("+changes" if dirty else "")


COMMIT = source_commit()


def harness_cores(s: dict[str, Any]) -> float:
    """The harness's own CPU over the run (agents, Locust, the collector), cores, from a summary.json."""
    harness = get(s, "measurements", "harness_processes") or {}
    duration = s.get("duration_s") or 0
    busy = get(s, "collector", "busy_s") or 0
    return round(sum((v or {}).get("cpu_cores_avg") or 0 for v in harness.values())
                 + (busy / duration if duration else 0), 3)


def run_trial(sc: Scenario, work: Path, tag: str, run_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run ``sc`` once in ``work/tag``: (its record: exit, start, commit, load average, wall time, run folder;
    its summary).  Ctrl-C tears the trial down and stops the bench."""
    load = [round(x, 2) for x in os.getloadavg()]
    started = datetime.now(UTC).isoformat(timespec="seconds")
    t0 = time.monotonic()
    runner = Runner(sc, work, quiet=True, run_id=run_id, run_dir=work / tag, point_latest=False)
    code = runner.run()
    if code == EXIT_INTERRUPTED:
        raise SystemExit(EXIT_INTERRUPTED)
    return ({"exit": code, "started": started, "commit": COMMIT, "load_average_at_start": load,
             "wall_s": round(time.monotonic() - t0, 1), "run_dir": str(runner.run_dir)}, runner.summary)


def add_trials(res: dict[str, Any], name: str, repeats: int, extend: bool, one: Callable[[int], dict[str, Any]],
               summarise: Callable[[list[dict[str, Any]]], dict[str, Any]], save: Callable[[], None]) -> None:
    """Trials of variant ``name`` of the point ``res`` up to ``repeats`` (``extend``: after those already there),
    each made by ``one(i)``, the medians by ``summarise``, the file written by ``save`` after each."""
    rows = list((res["variants"].get(name) or {}).get("trials") or []) if extend else []
    for i in range(len(rows), repeats):
        rows.append(one(i))
        res["variants"][name] = {"trials": rows, "medians": summarise(rows)}
        save()


def trial_lines(doc: dict[str, Any]) -> list[str]:
    """A line per point and variant listing its trials: start (UTC), commit, load average at the start, exit, wall
    time (trials with no start recorded are a first run, from before trials recorded it)."""
    out = []
    for r in doc.get("results", []):
        for name, v in r["variants"].items():
            said = [f"{t.get('started') or 'first run'} ({t.get('commit') or '-'}, load "
                    f"{t['load_average_at_start'][0]}, exit {t['exit']}, {t['wall_s']} s)" for t in v.get("trials", [])]
            if said:
                out.append(f"- {r['point']} / {name}: " + "; ".join(said))
    return out


def save(out: Path, stem: str, doc: dict[str, Any], markdown: Callable[[dict[str, Any]], str]) -> None:
    """``out/stem.json`` and ``.md``, with no machine path in them (:func:`portable.portable`)."""
    shown = portable(doc)
    (out / f"{stem}.json").write_text(json.dumps(shown, indent=2) + "\n")
    (out / f"{stem}.md").write_text(markdown(shown))
