"""One distillation job's section of the run report, from what the API server and the student's log hold.

Pure functions (no API calls), so the figures can be checked on recorded documents:

- **scheduling delay**: pod ``creationTimestamp`` -> its ``PodScheduled`` condition, and the
  student's also from its Job's ``creationTimestamp`` (whole seconds on both ends: the API's
  resolution, so 0 means "within the same second");
- **samples/s over time**: the student's progress lines (``{"t", "samples", "epoch"}``, written
  to its stdout) differenced over 2 s bins;
- **teacher count over time**: ready endpoints in the Service's EndpointSlices, sampled each second
  by the run (what the student itself follows), and teacher pods that exist;
- **accuracy, lost samples**: the student's last log line (its JSON result);
- **against the standalone bench**: the accuracy the bench (``reports/bench/distill.json``) measured
  for the same seed and settings; the job matches it when the gap is within the spread of the
  bench's seeds (max - min).
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from hollow.clock import parse_rfc3339
from hollowscale.paths import REPO_ROOT
from hollowscale.scenario.distill import DistillJobSpec

BENCH_FILE = REPO_ROOT / "reports" / "bench" / "distill.json"
BIN_S = 2.0


def parse_log(log: str) -> tuple[list[tuple[float, int]], dict[str, Any] | None]:
    """(progress points (t, samples), the result line) from a student's log; other lines are ignored."""
    points: list[tuple[float, int]] = []
    result: dict[str, Any] | None = None
    for line in log.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        if not isinstance(doc, dict):
            continue
        if "t" in doc and "samples" in doc:
            points.append((float(doc["t"]), int(doc["samples"])))
        elif "test_accuracy" in doc:
            result = doc
    return points, result


def rate_series(points: list[tuple[float, int]], t0: float, bin_s: float = BIN_S) -> list[tuple[float, float]]:
    """(seconds after ``t0`` at the bin's end, samples/s within the bin) from cumulative progress points."""
    if len(points) < 2:
        return []
    out: list[tuple[float, float]] = []
    start_t, start_n = points[0]
    for t, n in points[1:]:
        if t - start_t >= bin_s:
            out.append((round(t - t0, 2), round((n - start_n) / (t - start_t), 1)))
            start_t, start_n = t, n
    return out


def _ts(value: str | None) -> float | None:
    return parse_rfc3339(value) if value else None


def pod_times(pod: dict[str, Any]) -> dict[str, float | None]:
    """created, scheduled (PodScheduled True), started (first container's startedAt), finished."""
    st = pod.get("status") or {}
    conds = {c["type"]: c for c in st.get("conditions") or []}
    sched = conds.get("PodScheduled") or {}
    cs = (st.get("containerStatuses") or [{}])[0].get("state") or {}
    started = (cs.get("running") or cs.get("terminated") or {}).get("startedAt")
    return {
        "created": _ts(pod["metadata"].get("creationTimestamp")),
        "scheduled": _ts(sched.get("lastTransitionTime")) if sched.get("status") == "True" else None,
        "started": _ts(started),
        "finished": _ts((cs.get("terminated") or {}).get("finishedAt")),
    }


def _delay(a: float | None, b: float | None) -> float | None:
    return round(b - a, 3) if a is not None and b is not None else None


def bench_reference(spec: DistillJobSpec, bench_file: Path = BENCH_FILE) -> dict[str, Any] | None:
    """The standalone bench's service-mode accuracy for this job's seed and settings, with the seeds' spread.

    None when the bench file is missing or ran other settings (then there is nothing to compare with).
    """
    if not bench_file.exists():
        return None
    doc = json.loads(bench_file.read_text())
    s = doc.get("settings") or {}
    same = (s.get("epochs") == spec.epochs and s.get("labelled") == spec.labelled
            and s.get("unlabelled") == spec.unlabelled and not doc.get("quick")
            and spec.test_images is None)
    if not same:
        return None
    # the service row with as many teachers as the job starts with (accuracy does not depend on it)
    rows = sorted((r for r in doc.get("rows") or [] if r.get("mode") == "service" and r.get("accuracies")),
                  key=lambda r: (r.get("teachers") != spec.teachers, str(r.get("row"))))
    if not rows:
        return None
    seeds, accs = list(rows[0].get("seeds") or []), list(rows[0].get("accuracies") or [])
    if spec.seed not in seeds or not accs:
        return None
    return {"file": str(bench_file), "row": rows[0].get("row"), "seed_accuracy": accs[seeds.index(spec.seed)],
            "mean": round(statistics.fmean(accs), 4), "spread": round(max(accs) - min(accs), 4),
            "seeds": seeds, "accuracies": accs, "date": doc.get("date")}


def job_report(spec: DistillJobSpec, t0: float, log: str, student_pod: dict[str, Any] | None,
               teacher_pods: list[dict[str, Any]], teacher_samples: list[tuple[float, int, int]],
               events: list[dict[str, Any]], job_created: str | None, pod_name: str | None,
               bench_file: Path = BENCH_FILE) -> dict[str, Any]:
    """The job's section (see the module docstring); ``t0`` is the load's start (times are relative to it)."""
    points, result = parse_log(log)
    student = pod_times(student_pod) if student_pod else {}
    teachers = [(p["metadata"]["name"], pod_times(p), (p.get("spec") or {}).get("nodeName")) for p in teacher_pods]
    teacher_delays = [d for d in (_delay(t["created"], t["scheduled"]) for _, t, _ in teachers) if d is not None]
    phase = ((student_pod or {}).get("status") or {}).get("phase")
    ref = bench_reference(spec, bench_file)
    acc = result.get("test_accuracy") if result else None
    gap = round(abs(acc - ref["seed_accuracy"]) * 100, 2) if acc is not None and ref else None
    lost = result.get("lost_samples") if result else None
    problems = []
    if phase != "Succeeded":
        problems.append(f"student pod {phase or 'missing'}")
    if result is None:
        problems.append("no result line in the student's log")
    if lost:
        problems.append(f"{lost} samples lost")
    if gap is not None and ref is not None and gap > ref["spread"] * 100:
        problems.append(f"accuracy {acc} is {gap} points from the bench's {ref['seed_accuracy']} (seeds' spread "
                        f"{ref['spread'] * 100:.2f} points)")
    return {
        "name": spec.name,
        "settings": spec.model_dump(mode="json"),
        "student_pod": pod_name,
        "student_node": ((student_pod or {}).get("spec") or {}).get("nodeName"),
        "student_phase": phase,
        "scheduling_delay_s": {
            # API timestamps on both ends (whole seconds): a local clock on one end would mix resolutions
            "student_from_job_create": _delay(_ts(job_created), student.get("scheduled")),
            "student_pod": _delay(student.get("created"), student.get("scheduled")),
            "student_pod_to_running": _delay(student.get("created"), student.get("started")),
            "teachers_median": round(statistics.median(teacher_delays), 3) if teacher_delays else None,
            "teachers_max": max(teacher_delays) if teacher_delays else None,
        },
        "training_s": _delay(points[0][0], points[-1][0]) if len(points) > 1 else None,
        "samples_per_s": result.get("samples_per_s") if result else None,
        "samples_per_s_series": rate_series(points, t0),
        "teacher_series": [(round(t - t0, 2), ready, pods) for t, ready, pods in teacher_samples],
        "teacher_pods": [{"name": n, "node": node, "created_s": _delay(t0, t["created"]),
                          "scheduling_delay_s": _delay(t["created"], t["scheduled"])} for n, t, node in teachers],
        "events": [{**e, "t": round(e["t"] - t0, 2)} for e in events],
        "test_accuracy": acc,
        "lost_samples": lost,
        "duplicate_samples": result.get("duplicate_samples") if result else None,
        "bench": ref,
        "accuracy_gap_pts": gap,
        "passed": not problems,
        "problems": problems,
    }


def measurements(jobs: list[dict[str, Any]]) -> dict[str, Any]:
    """``measurements.distill``: what SLOs may name (``distill.lost_samples`` etc.)."""
    lost = [j["lost_samples"] for j in jobs]
    gaps = [j["accuracy_gap_pts"] for j in jobs if j["accuracy_gap_pts"] is not None]
    return {
        "jobs": len(jobs),
        "failed_jobs": sum(1 for j in jobs if j["student_phase"] != "Succeeded"),
        # a job with no result counts as having lost everything it did not report
        "lost_samples": sum(x for x in lost if x is not None) if all(x is not None for x in lost) else None,
        "accuracy_gap_pts": max(gaps) if gaps else None,
    }
