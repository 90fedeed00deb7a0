"""``hollowscale distill bench``: EDL's table, measured on this machine.

Rows: pure / same-net / service with 1, 2 and 4 teachers / service with one of two
teachers SIGKILLed mid-epoch and restarted. Each row runs the student once per seed as a
real subprocess (``python -m distill.student``), teachers as real subprocesses
(``python -m distill.teacher``). Every process is pinned (see :func:`distill.procs.cpu_layout`)
so the teachers have their own core and do not steal the student's.

Output in ``--out``: ``summary.json`` (docs/architecture.md, "Contracts": ``rows`` with mode, teachers,
accuracy_mean, accuracy_std, samples_per_s, ratio_to_pure, lost_samples; plus device and
quick), ``summary.md``, ``bench.png``, and every run's JSON and logs under ``runs/``.
"""

from __future__ import annotations

import json
import logging
import os
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from distill.models import load_checkpoint
from distill.procs import TeacherProcess, affinity_preexec, cpu_layout
from distill.train_teacher import TeacherTrainSettings, default_checkpoint, train_teacher

log = logging.getLogger("distill.bench")

# EDL (Baidu) ResNet50_vd student / ResNeXt101 teacher on ImageNet, 8xV100 (docs/architecture.md, "Reference numbers").
EDL = {
    "same_net_ratio_to_pure": 0.359,
    "service_ratio_to_pure": 0.828,
    "service_over_same_net": 2.31,
    "distill_gain_points": 1.9,
}


@dataclass(frozen=True)
class BenchSettings:
    """Sizes of the benchmark. The defaults are the full run (~30-40 min on 2 busy cores).

    Attributes:
        out: output folder (``summary.json``, ``summary.md``, ``bench.png``, ``runs/``).
        quick: the smoke-test sizes of :meth:`quick_settings` (also picks the quick teacher).
        seeds: student seeds; every row runs once per seed.
        epochs: passes over the unlabelled images per student run.
        labelled: labelled training images (class balanced), images.
        unlabelled: unlabelled images per epoch (of the 58,000 available); None: all of them.
        teacher_counts: teachers of each ``service-<n>`` row.
        kill_at_fraction: when the kill row SIGKILLs a teacher, as a fraction (0..1) of the run's
            samples (0.2: mid first epoch of two).
        teacher_down_s: seconds the killed teacher stays dead before its restart on the same port.
        run_timeout_s: seconds one student run may take before the bench fails.
        checkpoint: teacher checkpoint; None: the cached one (trained first if missing).
        extra_student_args: more ``python -m distill.student`` flags for every run.
    """

    out: Path
    quick: bool = False
    seeds: tuple[int, ...] = (0, 1, 2)
    epochs: int = 2
    labelled: int = 2000
    unlabelled: int | None = 30000  # unlabelled images per epoch (of the 58,000 available)
    teacher_counts: tuple[int, ...] = (1, 2, 4)
    kill_at_fraction: float = 0.2  # of the run's samples, i.e. mid first epoch
    teacher_down_s: float = 2.0  # how long the killed teacher stays dead before the restart
    run_timeout_s: float = 1800.0
    checkpoint: Path | None = None
    extra_student_args: tuple[str, ...] = ()

    @staticmethod
    def quick_settings(out: Path) -> BenchSettings:
        """A few minutes on 2 busy cores: one seed, 1,000 labelled + 2,880 unlabelled images, two
        short epochs, accuracy on the first 2,000 test images. A smoke test of every row, not a
        measurement."""
        return BenchSettings(
            out=out, quick=True, seeds=(0,), epochs=2, labelled=1000, unlabelled=2880,
            kill_at_fraction=0.25, teacher_down_s=0.5, run_timeout_s=300.0,
            extra_student_args=("--eval-last-only", "--test-images", "2000"),
        )  # fmt: skip


@dataclass
class RunRecord:
    row: str
    seed: int
    result: dict[str, Any]
    events: dict[str, Any] = field(default_factory=dict)


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def ensure_teacher(settings: BenchSettings) -> Path:
    """The cached teacher; trains it if missing (the quick bench settles for a quick teacher)."""
    if settings.checkpoint is not None:
        return settings.checkpoint
    full = default_checkpoint()
    if full.exists():
        return full
    if settings.quick:
        quick = default_checkpoint(quick=True)
        if not quick.exists():
            log.warning("no cached teacher: training a quick one (1 epoch on 12,000 images) into %s", quick)
            train_teacher(quick, TeacherTrainSettings(epochs=1, train_images=12000))
        return quick
    log.warning("no cached teacher: training it now into %s (hollowscale distill train-teacher)", full)
    train_teacher(full)
    return full


class Bench:
    """Runs the rows and writes the reports."""

    def __init__(self, settings: BenchSettings) -> None:
        self.s = settings
        self.runs_dir = settings.out / "runs"
        self.runs_dir.mkdir(parents=True, exist_ok=True)
        self.student_cpus, self.teacher_cpus, self.pinning = cpu_layout()
        self.checkpoint = ensure_teacher(settings)
        self.teacher_meta = load_checkpoint(self.checkpoint).meta
        self.records: list[RunRecord] = []
        self.teachers: list[TeacherProcess] = []
        self.current: subprocess.Popen[bytes] | None = None  # the running student, if any

    # ------------------------------------------------------------ processes
    def _student_cmd(self, mode: str, seed: int, out: Path, teachers: list[str], progress: Path | None) -> list[str]:
        s = self.s
        cmd = [
            sys.executable, "-m", "distill.student", "--mode", mode, "--seed", str(seed),
            "--epochs", str(s.epochs), "--labelled", str(s.labelled),
            "--cpus", self.student_cpus, "--threads", "1", "--checkpoint", str(self.checkpoint),
            "--out", str(out), *s.extra_student_args,
        ]  # fmt: skip
        if s.unlabelled is not None:
            cmd += ["--unlabelled", str(s.unlabelled)]
        if teachers:
            cmd += ["--teachers", ",".join(teachers)]
        if progress is not None:
            cmd += ["--progress-file", str(progress)]
        return cmd

    def _start_teachers(self, n: int) -> None:
        """One pool for all service rows (a row with k teachers uses the first k); idle
        teachers sleep in epoll and cost nothing, and the bench pays startup only once."""
        cores = self.teacher_cpus.split(",")
        self.teachers = [
            TeacherProcess(self.checkpoint, self.runs_dir / "teachers", f"teacher{i}", cpus=cores[i % len(cores)])
            for i in range(n)
        ]
        for t in self.teachers:
            t.start()
        for t in self.teachers:
            t.wait_ready(180)

    def _row_metrics(self, ts: list[TeacherProcess], before: dict[str, dict[str, float]]) -> dict[str, Any]:
        after = {t.name: t.metrics() for t in ts}
        delta = {
            name: {
                k: v - before.get(name, {}).get(k, 0.0)
                for k, v in m.items()
                if k.endswith(("_total", "_sum", "_count"))
            }
            for name, m in after.items()
        }
        return {"metrics": delta}

    def _run_student(
        self, row: str, mode: str, seed: int, teachers: list[str], progress: bool = False
    ) -> subprocess.Popen[bytes]:
        out = self.runs_dir / row / f"seed{seed}.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        prog = out.with_suffix(".progress.jsonl") if progress else None
        logf = (out.parent / f"seed{seed}.log").open("wb")
        log.info("row %-22s seed %d ...", row, seed)
        return subprocess.Popen(
            self._student_cmd(mode, seed, out, teachers, prog),
            stdout=logf,
            stderr=subprocess.STDOUT,
            preexec_fn=affinity_preexec(self.student_cpus),
        )

    def _collect(
        self, row: str, seed: int, proc: subprocess.Popen[bytes], events: dict[str, Any] | None = None
    ) -> None:
        self.current = proc
        try:
            rc = proc.wait(timeout=self.s.run_timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise RuntimeError(f"{row} seed {seed}: student did not finish in {self.s.run_timeout_s}s") from None
        out = self.runs_dir / row / f"seed{seed}.json"
        if not out.exists():
            raise RuntimeError(f"{row} seed {seed}: student failed (exit {rc}); see {out.with_suffix('.log')}")
        res = json.loads(out.read_text())
        log.info(
            "row %-22s seed %d: accuracy %.4f, %.0f samples/s, lost %d",
            row,
            seed,
            res["test_accuracy"],
            res["samples_per_s"],
            res["lost_samples"],
        )
        self.records.append(RunRecord(row, seed, res, events or {}))

    # ------------------------------------------------------------ rows
    def run(self) -> dict[str, Any]:
        t0 = time.time()
        teacher_rows: dict[str, Any] = {}
        try:
            # Teachers first, and ready before any timed run: their start-up must not overlap one.
            self._start_teachers(max(*self.s.teacher_counts, 2))
            for seed in self.s.seeds:
                self._collect("pure", seed, self._run_student("pure", "pure", seed, []))
            for seed in self.s.seeds:
                self._collect("same-net", seed, self._run_student("same-net", "same-net", seed, []))
            for n in self.s.teacher_counts:
                row = f"service-{n}"
                ts = self.teachers[:n]
                before = {t.name: t.metrics() for t in ts}
                for seed in self.s.seeds:
                    self._collect(row, seed, self._run_student(row, "service", seed, [t.url for t in ts]))
                teacher_rows[row] = self._row_metrics(ts, before)
            teacher_rows["service-2-kill"] = self._kill_row()
        finally:
            if self.current is not None and self.current.poll() is None:
                self.current.terminate()  # interrupted mid-run: take the student down too
                self.current.wait(timeout=30)
            codes = {t.name: t.stop() for t in self.teachers}
        teacher_rows["exit_codes"] = codes
        summary = self.summarise(teacher_rows, time.time() - t0)
        write_reports(summary, self.s.out)
        return summary

    def _kill_row(self) -> dict[str, Any]:
        """Two teachers; SIGKILL one at ``kill_at_fraction`` of the run, restart it after ``teacher_down_s``."""
        row = "service-2-kill"
        ts = self.teachers[:2]
        victim = ts[1]
        for seed in self.s.seeds:
            proc = self._run_student(row, "service", seed, [t.url for t in ts], progress=True)
            prog = self.runs_dir / row / f"seed{seed}.progress.jsonl"
            expected = self._expected_samples()
            events: dict[str, Any] = {}
            while proc.poll() is None:
                done = _last_progress(prog)
                if done >= self.s.kill_at_fraction * expected:
                    events["killed_at"] = victim.kill()
                    events["killed_at_samples"] = done
                    time.sleep(self.s.teacher_down_s)
                    events["restart_launched_at"] = time.time()
                    victim.start()
                    events["ready_at"] = victim.wait_ready(120)
                    break
                time.sleep(0.05)
            self._collect(row, seed, proc, events)
        return self._row_metrics(ts, {})  # the victim restarted: its counters start from 0 again

    def _expected_samples(self) -> int:
        unl = self.s.unlabelled if self.s.unlabelled is not None else 60000 - self.s.labelled
        return self.s.epochs * (unl // 96) * 128

    # ------------------------------------------------------------ summary
    def summarise(self, teacher_rows: dict[str, Any], duration_s: float) -> dict[str, Any]:
        rows_order = ["pure", "same-net", *[f"service-{n}" for n in self.s.teacher_counts], "service-2-kill"]
        by_row: dict[str, list[RunRecord]] = {}
        for rec in self.records:
            by_row.setdefault(rec.row, []).append(rec)
        rows: list[dict[str, Any]] = []
        for name in rows_order:
            recs = by_row.get(name, [])
            if not recs:
                continue
            rows.append(_row_stats(name, recs, teacher_rows.get(name)))
        ratios = set_ratios(rows, self.s.quick)
        summary: dict[str, Any] = {
            "schema_version": 1,
            "command": "hollowscale distill bench "
            + " ".join(sys.argv[2:] if sys.argv[1:2] == ["bench"] else sys.argv[1:]),
            "quick": self.s.quick,
            "device": "cpu",
            "cpu_model": cpu_model(),
            "cores": len(os.sched_getaffinity(0)),
            "torch_version": torch.__version__,
            "python": platform.python_version(),
            "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "duration_s": round(duration_s, 1),
            "pinning": self.pinning,
            "settings": {k: (shown_path(v) if isinstance(v, Path) else v) for k, v in asdict(self.s).items()},
            "teacher_exit_codes": teacher_rows.get("exit_codes"),
            "teacher": {
                "checkpoint": shown_path(self.checkpoint),
                **{k: self.teacher_meta.get(k) for k in ("test_accuracy", "torch_version")},
            },
            "rows": rows,
            "edl_reference": EDL,
            "ratios": ratios,
            "edl_comparison": _edl_comparison(rows),
            # the cost model is built from the same runs' CPU times: not from quick mode's (see QUICK_NO_RATIOS)
            "limits": {} if self.s.quick else _limits(rows),
            "elasticity": _elasticity([r for r in self.records if r.row == "service-2-kill"]),
        }
        return summary


def _last_progress(path: Path) -> int:
    try:
        with path.open("rb") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return 0
    for line in reversed(lines):
        try:
            return int(json.loads(line)["samples"])
        except (ValueError, KeyError):
            continue
    return 0


def _mean_std(vals: list[float]) -> tuple[float, float]:
    if not vals:
        return 0.0, 0.0
    return statistics.fmean(vals), (statistics.stdev(vals) if len(vals) > 1 else 0.0)


def _row_stats(name: str, recs: list[RunRecord], teacher_info: dict[str, Any] | None) -> dict[str, Any]:
    res = [r.result for r in recs]
    acc_m, acc_s = _mean_std([r["test_accuracy"] for r in res])
    sps_m, sps_s = _mean_std([r["samples_per_s"] for r in res])
    # Whole student process (training thread + reader thread + batch production): the fair unit,
    # because pure and same-net build batches in the training thread and service in the reader's.
    cpu_rate = [r["trained_samples"] / r["cpu_s_process"] for r in res if r.get("cpu_s_process")]
    wait = [r.get("reader", {}).get("consumer_wait_s", 0.0) for r in res]
    train_s = [r["train_s"] for r in res]
    share = [
        r["cpu_s_process"] / max(1e-9, r["train_s"] - r.get("reader", {}).get("consumer_wait_s", 0.0)) for r in res
    ]
    mode = res[0]["mode"]
    teachers = 0
    if mode == "service":
        teachers = len(res[0].get("reader", {}).get("teachers", {}))
    elif mode == "same-net":
        teachers = 1
    row: dict[str, Any] = {
        "row": name,
        "mode": mode,
        "teachers": teachers,
        "teacher_placement": {"pure": "none", "same-net": "in the student process, student core"}.get(
            mode, "separate processes, teacher core(s)"
        ),
        "seeds": [r["seed"] for r in res],
        "accuracy_mean": acc_m,
        "accuracy_std": acc_s,
        "accuracies": [r["test_accuracy"] for r in res],
        "samples_per_s": sps_m,
        "samples_per_s_std": sps_s,
        "trained_samples_per_run": max(r["trained_samples"] for r in res),
        "train_s_max": max(train_s),
        "samples_per_student_cpu_s": statistics.fmean(cpu_rate) if cpu_rate else 0.0,
        "student_core_share": statistics.fmean(share),
        "waited_for_teacher_fraction": sum(wait) / max(1e-9, sum(train_s)),
        "lost_samples": sum(r["lost_samples"] for r in res),
        "duplicate_samples": sum(r["duplicate_samples"] for r in res),
        "retries": sum(r.get("reader", {}).get("retries", 0) for r in res),
        "cpu_s_outside_training_thread": sum(r["cpu_s_process"] - r["cpu_s_training_thread"] for r in res),
        "loadavg_1m": [r.get("loadavg_start", [0])[0] for r in res],
    }
    if teacher_info:
        ms = teacher_info.get("metrics", {})
        samples = sum(m.get("teacher_samples_total", 0.0) for m in ms.values())
        inf_s = sum(m.get("teacher_inference_seconds_sum", 0.0) for m in ms.values())
        batches = sum(m.get("teacher_batch_size_count", 0.0) for m in ms.values())
        row["teacher_samples_per_inference_s"] = samples / inf_s if inf_s else None
        row["teacher_mean_batch"] = samples / batches if batches else None
    return row


#: The speed ratios of a row. Each has a physical bound: pure (no teacher at all) is the fastest a student
#: on the same core can train, because same-net adds the teacher's inference to every step on that core and
#: service adds the reader's work (batches, HTTP, decoding) on it and any wait for teachers. So no row trains
#: faster than pure, neither in wall-clock samples/s nor per student CPU-second, and same-net is never
#: faster than pure (pure's ratio to same-net is at least 1).
RATIO_FIELDS = ("ratio_to_pure", "ratio_to_same_net", "cpu_ratio_to_pure")

#: Core-share spread (max - min over rows) above which the wall-clock ratios carry the machine's other load.
SHARE_SPREAD_WARN = 0.10

QUICK_NO_RATIOS = (
    "quick mode prints no speed ratios (vs pure, vs same-net, per student CPU-s): every row is one run of "
    "{samples} samples (one seed, {secs:.0f} s of training at most), the rows run one after another, and on "
    "this shared machine the wall-clock samples/s of so short a run follow the share of its core that other "
    "processes left the student (here {lo:.0f}-{hi:.0f}%, column 'student core share') as much as the teachers. "
    "A pure run that lost part of its core made the service student look faster than pure (126% was printed), "
    "past the bound that pure, with no teacher at all, sets. For the same reason the cost model built from these "
    "runs is left out. The full bench (3 seeds, 10x the samples per run) prints the ratios and withholds any past "
    "its bound."
)


def _div(a: float, b: float | None) -> float | None:
    return a / b if b else None


def set_ratios(rows: list[dict[str, Any]], quick: bool) -> dict[str, Any]:
    """Fill every row's ratios and accuracy gain; withhold (None) the ratios the run cannot support.

    Quick mode withholds every speed ratio (see :data:`QUICK_NO_RATIOS`: the runs are too short for a
    wall-clock comparison between rows on a shared machine). Otherwise a ratio past its physical bound
    (:data:`RATIO_FIELDS`) is withheld and listed, because such a figure measures the timing noise, not the
    teacher. Returns what was done: ``printed``, ``why`` (quick), ``withheld`` (row, ratio, bound) and the
    range of the student's core share over the rows.
    """
    by = {r["row"]: r for r in rows}
    pure, same = by.get("pure"), by.get("same-net")
    for r in rows:
        r["ratio_to_pure"] = _div(r["samples_per_s"], pure["samples_per_s"] if pure else None)
        r["ratio_to_same_net"] = _div(r["samples_per_s"], same["samples_per_s"] if same else None)
        r["cpu_ratio_to_pure"] = _div(
            r["samples_per_student_cpu_s"], pure["samples_per_student_cpu_s"] if pure else None
        )
        r["accuracy_gain_points_vs_pure"] = (r["accuracy_mean"] - pure["accuracy_mean"]) * 100 if pure else None
    shares = [r["student_core_share"] for r in rows]
    out: dict[str, Any] = {
        "printed": not quick,
        "why": None,
        "withheld": [],
        "student_core_share_range": [min(shares), max(shares)] if shares else None,
    }
    if quick:
        longest = max((r.get("train_s_max", 0.0) for r in rows), default=0.0)
        out["why"] = QUICK_NO_RATIOS.format(
            samples=max((r.get("trained_samples_per_run", 0) for r in rows), default=0),
            secs=longest,
            lo=100 * min(shares, default=0.0),
            hi=100 * max(shares, default=0.0),
        )
        for r in rows:
            for k in RATIO_FIELDS:
                r[k] = None
        return out
    for r in rows:
        past: list[tuple[str, str]] = []
        if r["mode"] != "pure":
            for k in ("ratio_to_pure", "cpu_ratio_to_pure"):
                if r[k] is not None and r[k] > 1.0:
                    past.append((k, "<= 1 (pure, with no teacher, is the fastest)"))
            if any(k == "ratio_to_pure" for k, _ in past) and r["mode"] == "service":
                # service/same-net <= pure/same-net is the same bound seen from same-net
                past.append(("ratio_to_same_net", "<= pure's ratio to same-net"))
        elif r["ratio_to_same_net"] is not None and r["ratio_to_same_net"] < 1.0:
            past.append(("ratio_to_same_net", ">= 1 (same-net is never faster than pure)"))
        for k, bound in past:
            r[k] = None
            out["withheld"].append({"row": r["row"], "ratio": k, "bound": bound})
    return out


def _edl_comparison(rows: list[dict[str, Any]]) -> dict[str, Any]:
    by = {r["row"]: r for r in rows}
    service = [r for r in rows if r["mode"] == "service" and r["row"] != "service-2-kill"]
    best = max(service, key=lambda r: r["samples_per_s"], default=None)
    same = by.get("same-net")
    return {
        "same_net_ratio_to_pure": same["ratio_to_pure"] if same else None,
        "best_service_row": best["row"] if best else None,
        "service_ratio_to_pure": best["ratio_to_pure"] if best else None,
        "service_over_same_net": best["ratio_to_same_net"] if best else None,
        "distill_gain_points": best["accuracy_gain_points_vs_pure"] if best else None,
        "same_net_gain_points": same["accuracy_gain_points_vs_pure"] if same else None,
    }


def _limits(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The cost model that bounds what one teacher core can show.

    s = student CPU-seconds per sample (pure run); the same-net run pays student and
    teacher on one core, 1/rate = s + t, which gives t. With perfect overlap and k teacher
    cores the service runs at min(1/s, k/t), so service/same-net <= (s+t)/max(s, t/k); for
    k = 1 that never exceeds 2.0. Showing >= 90% of pure and >= 2.5x same-net at once needs
    t >= 1.78*s (same-net <= 36% of pure) and k >= t/(0.9*s) >= 1.98 teacher cores.
    """
    by = {r["row"]: r for r in rows}
    pure, same = by.get("pure"), by.get("same-net")
    if not pure or not same or not pure["samples_per_student_cpu_s"] or not same["samples_per_student_cpu_s"]:
        return {}
    s = 1.0 / pure["samples_per_student_cpu_s"]
    t = 1.0 / same["samples_per_student_cpu_s"] - s
    if t <= 0:  # same-net measured no dearer per sample than pure: past the bound, no model from that
        return {}
    k = 1
    out = {
        "student_cpu_ms_per_sample": s * 1000,
        "teacher_cpu_ms_per_sample": t * 1000,
        "teacher_to_student_cost": t / s if s else None,
        "predicted_same_net_ratio_to_pure": s / (s + t),
        "predicted_service_ratio_to_pure_1_core": min(1.0, s / t) if t > 0 else 1.0,
        "max_service_over_same_net_1_teacher_core": (s + t) / max(s, t / k),
        "teacher_cores_for_90pct_of_pure": t / (0.9 * s) if s else None,
        "note": (
            "With one teacher core the service can at best run at min(1, s/t) of pure and at most "
            "(s+t)/max(s,t) <= 2.0x same-net; showing >=90% of pure and >=2.5x same-net at once "
            "needs >= 2 teacher cores per student core (t >= 1.78 s)."
        ),
    }
    return out


def _rate_windows(
    timeline: list[list[float]], t0: float, t1: float, width: float, skip: list[list[float]]
) -> list[tuple[float, float]]:
    """(window start, samples/s) for windows of ``width`` s starting every 0.1 s in [t0, t1-width]."""
    import bisect

    ts = [p[0] for p in timeline]
    out: list[tuple[float, float]] = []
    a = t0
    while a + width <= t1:
        b = a + width
        if not any(a < e1 and b > e0 for e0, e1 in skip):
            i, j = bisect.bisect_right(ts, a) - 1, bisect.bisect_right(ts, b) - 1
            if i >= 0 and j > i:
                dt = timeline[j][0] - timeline[i][0]
                if dt > 0:
                    out.append((a, (timeline[j][1] - timeline[i][1]) / dt))
        a += 0.1
    return out


def _elasticity(recs: list[RunRecord]) -> dict[str, Any]:
    """Per kill/restart run: samples lost, throughput before/during/after, time to recover."""
    runs = []
    for r in recs:
        ev, res = r.events, r.result
        tl = res.get("timeline", [])
        if not ev.get("killed_at") or len(tl) < 3:
            runs.append({"seed": r.seed, "measured": False, "lost_samples": res["lost_samples"]})
            continue
        skip = res.get("eval_intervals", [])
        start = tl[0][0] + 1.0
        before = [v for _, v in _rate_windows(tl, start, ev["killed_at"], 1.0, skip)]
        baseline = statistics.median(before) if before else None
        during = [v for _, v in _rate_windows(tl, ev["killed_at"], ev["ready_at"], 1.0, skip)]
        after = _rate_windows(tl, ev["ready_at"], tl[-1][0], 1.0, skip)
        recovered_s = None
        if baseline:
            for a, v in after:
                if v >= 0.9 * baseline:
                    recovered_s = max(0.0, a - ev["ready_at"])
                    break
        teachers = res.get("reader", {}).get("teachers", {})
        rejoin = None
        for info in teachers.values():
            later = [t for t in info.get("became_live_at", []) if t >= ev["ready_at"] - 0.5]
            if later:
                rejoin = max(0.0, later[0] - ev["ready_at"])  # <0: the reader saw it before the bench did
        runs.append({
            "seed": r.seed,
            "measured": True,
            "lost_samples": res["lost_samples"],
            "duplicate_samples": res["duplicate_samples"],
            "retries": res.get("reader", {}).get("retries", 0),
            "killed_at_samples": ev.get("killed_at_samples"),
            "teacher_down_s": round(ev["ready_at"] - ev["killed_at"], 3),
            "restart_to_ready_s": round(ev["ready_at"] - ev["restart_launched_at"], 3),
            "reader_rejoin_after_ready_s": round(rejoin, 3) if rejoin is not None else None,
            "baseline_samples_per_s": baseline,
            "during_outage_samples_per_s": statistics.fmean(during) if during else None,
            "recovered_within_s": round(recovered_s, 2) if recovered_s is not None else None,
            "samples_served_by_teacher": {u: i["samples_ok"] for u, i in teachers.items()},
        })  # fmt: skip
    rec = [x["recovered_within_s"] for x in runs if x.get("recovered_within_s") is not None]
    return {
        "runs": runs,
        "lost_samples_total": sum(x["lost_samples"] for x in runs),
        "recovered_within_s_max": max(rec) if rec else None,
        "definition": (
            "recovered_within_s: time from the restarted teacher answering /readyz until the student's "
            "1-second throughput is back to >= 90% of its median before the kill (evaluation pauses excluded)"
        ),
    }


# ---------------------------------------------------------------- reports
def _pct(v: float | None) -> str:
    return "n/a" if v is None else f"{v * 100:.1f}%"


def _x(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.2f}x"


def render_markdown(summary: dict[str, Any]) -> str:
    s = summary
    lines = [
        f"# Distillation bench ({'quick' if s['quick'] else 'full'})",
        "",
        f"- date: {s['date']}; machine: {s['cores']} cores, {s['cpu_model']}; device: {s['device']}; "
        f"torch {s['torch_version']}; duration {s['duration_s']:.0f} s",
        f"- pinning: {s['pinning']}",
        f"- teacher: test accuracy {s['teacher'].get('test_accuracy')} ({s['teacher']['checkpoint']})",
        f"- data: {s['settings']['labelled']} labelled images + {s['settings']['unlabelled']} unlabelled per epoch, "
        f"{s['settings']['epochs']} epochs, seeds {s['settings']['seeds']}",
        "",
        "| row | teachers | accuracy (mean ± std) | samples/s | vs pure | vs same-net | samples per student CPU-s | "
        "student core share | waited on teachers | lost | retries |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in s["rows"]:
        lines.append(
            f"| {r['row']} | {r['teachers']} | {r['accuracy_mean'] * 100:.2f} ± {r['accuracy_std'] * 100:.2f} | "
            f"{r['samples_per_s']:.0f} | {_pct(r['ratio_to_pure'])} | {_x(r['ratio_to_same_net'])} | "
            f"{r['samples_per_student_cpu_s']:.0f} | {r['student_core_share'] * 100:.0f}% | "
            f"{r['waited_for_teacher_fraction'] * 100:.1f}% | {r['lost_samples']} | {r['retries']} |"
        )
    lines += _ratio_notes(s.get("ratios") or {})
    e, ref = s["edl_comparison"], s["edl_reference"]
    gain = e.get("distill_gain_points")
    lines += [
        "",
        "## Beside EDL (ResNet50_vd / ResNeXt101, ImageNet, 8xV100)",
        "",
        "| figure | EDL | here |",
        "|---|---|---|",
        f"| same-net speed vs pure | {_pct(ref['same_net_ratio_to_pure'])} | {_pct(e['same_net_ratio_to_pure'])} |",
        f"| service speed vs pure ({e['best_service_row']}) | {_pct(ref['service_ratio_to_pure'])} | "
        f"{_pct(e['service_ratio_to_pure'])} |",
        f"| service vs same-net | {_x(ref['service_over_same_net'])} | {_x(e['service_over_same_net'])} |",
        f"| accuracy gain of distillation (points) | +{ref['distill_gain_points']} | "
        f"{'n/a' if gain is None else f'{gain:+.2f}'} |",
        "",
    ]
    lim = s.get("limits") or {}
    if lim:
        lines += [
            "## What two cores can show (cost model from the measured CPU time)",
            "",
            f"- student training: {lim['student_cpu_ms_per_sample']:.3f} CPU-ms per sample; teacher inference: "
            f"{lim['teacher_cpu_ms_per_sample']:.3f} CPU-ms per sample (t/s = {lim['teacher_to_student_cost']:.2f})",
            f"- predicted same-net speed: {_pct(lim['predicted_same_net_ratio_to_pure'])} of pure; predicted service "
            f"speed with one teacher core and perfect overlap: {_pct(lim['predicted_service_ratio_to_pure_1_core'])}",
            f"- ceiling of service/same-net with one teacher core: {_x(lim['max_service_over_same_net_1_teacher_core'])}; "
            f"teacher cores needed for 90% of pure: {lim['teacher_cores_for_90pct_of_pure']:.2f}",
            f"- {lim['note']}",
            "- 'samples per student CPU-s' divides by the CPU time the student's training thread really got; "
            "'student core share' is the fraction of its core it got (the rest went to other processes on "
            "this shared machine). Wall-clock samples/s move with that share; the CPU-normalised column does not.",
            "",
        ]
    el = s.get("elasticity") or {}
    if el.get("runs"):
        lines += ["## Elasticity (one of two teachers SIGKILLed mid-epoch, restarted on the same port)", ""]
        lines += [
            "| seed | lost | retries | down (kill->ready) s | restart->ready s | reader rejoin s | before | during | "
            "recovered within s |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for r in el["runs"]:
            if not r.get("measured"):
                lines.append(f"| {r['seed']} | {r['lost_samples']} | not measured (run ended first) |||||||")
                continue
            lines.append(
                f"| {r['seed']} | {r['lost_samples']} | {r['retries']} | {r['teacher_down_s']} | "
                f"{r['restart_to_ready_s']} | {r['reader_rejoin_after_ready_s']} | "
                f"{_num(r['baseline_samples_per_s'])} | {_num(r['during_outage_samples_per_s'])} | "
                f"{r['recovered_within_s']} |"
            )
        lines += ["", f"{el['definition']}.", ""]
    return "\n".join(lines) + "\n"


def _ratio_notes(ratios: dict[str, Any]) -> list[str]:
    """What the table's ratio columns do not show, and why (quick mode, withheld ratios, other load)."""
    lines: list[str] = []
    if ratios.get("why"):
        lines += ["", f"No ratios: {ratios['why']}"]
    for w in ratios.get("withheld") or []:
        lines += [
            "",
            f"Withheld: {w['row']} {w['ratio']} was measured past its bound ({w['bound']}): the timing "
            "noise of this run is larger than the difference it would show.",
        ]
    rng = ratios.get("student_core_share_range")
    if ratios.get("printed") and rng and rng[1] - rng[0] > SHARE_SPREAD_WARN:
        lines += [
            "",
            f"Caution: the student's core share ranged {rng[0] * 100:.0f}-{rng[1] * 100:.0f}% over the "
            "rows: other processes took part of its core, and the wall-clock ratios carry that.",
        ]
    return lines


def _num(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.0f}"


def plot(summary: dict[str, Any], path: Path, kill_runs_dir: Path | None = None) -> None:
    """Three panels: samples/s (wall and CPU-normalised), accuracy with spread, kill timeline."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = summary["rows"]
    names = [r["row"] for r in rows]
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.5))
    xs = range(len(rows))
    axes[0].bar([x - 0.2 for x in xs], [r["samples_per_s"] for r in rows], 0.4, label="wall-clock samples/s")
    axes[0].bar([x + 0.2 for x in xs], [r["samples_per_student_cpu_s"] for r in rows], 0.4, label="per student CPU-s")
    axes[0].set_xticks(list(xs), names, rotation=30, ha="right")
    axes[0].set_title("student throughput")
    axes[0].legend(fontsize=8)
    axes[1].errorbar(
        list(xs),
        [r["accuracy_mean"] * 100 for r in rows],
        yerr=[r["accuracy_std"] * 100 for r in rows],
        fmt="o",
        capsize=4,
    )
    axes[1].set_xticks(list(xs), names, rotation=30, ha="right")
    axes[1].set_ylabel("test accuracy %")
    axes[1].set_title("accuracy (mean ± std over seeds)")
    ax = axes[2]
    ax.set_title("kill & restart (1 s windows)")
    if kill_runs_dir is not None:
        for f in sorted(kill_runs_dir.glob("seed*.json")):
            res = json.loads(f.read_text())
            tl = res.get("timeline", [])
            if len(tl) < 3:
                continue
            w = _rate_windows(tl, tl[0][0], tl[-1][0], 1.0, [])
            t0 = tl[0][0]
            ax.plot([a - t0 for a, _ in w], [v for _, v in w], label=f"seed {res['seed']}")
            for ev in res.get("reader", {}).get("events", []):
                if ev["event"] == "down":
                    ax.axvline(ev["t"] - t0, color="red", lw=0.8, ls="--")
                if ev["event"] == "live" and ev["t"] - t0 > 2:
                    ax.axvline(ev["t"] - t0, color="green", lw=0.8, ls="--")
        ax.set_xlabel("s since start (red: teacher lost, green: back)")
        ax.set_ylabel("samples/s")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def shown_path(path: Path) -> str:
    """``path`` as the summary shows it (``make bench-distill`` commits it as reports/bench/distill.json, and a
    committed file names no machine's folders): relative to the working folder (the repository) when
    inside it, ``~/...`` in the home folder, else the last component (a run folder's name)."""
    full = Path(path).expanduser()
    if not full.is_absolute():
        return str(path)
    for base, shown in ((Path.cwd(), "{}"), (Path.home(), "~/{}")):
        if full.is_relative_to(base):
            return shown.format(full.relative_to(base))
    return full.name


def write_reports(summary: dict[str, Any], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    (out / "summary.md").write_text(render_markdown(summary))
    kill_dir = out / "runs" / "service-2-kill"
    plot(summary, out / "bench.png", kill_dir if kill_dir.exists() else None)


def _sigterm_as_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def run_bench(settings: BenchSettings) -> dict[str, Any]:
    """Entry point used by the CLI. SIGTERM is handled like Ctrl-C: student and teachers stop."""
    import signal
    import threading

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _sigterm_as_interrupt)
        if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:  # started in the background by a shell
            signal.signal(signal.SIGINT, signal.default_int_handler)
    return Bench(settings).run()
