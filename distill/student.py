"""Student trainer: ``python -m distill.student --mode pure|same-net|service``.

The three rows of EDL's table, on identical data, seeds and epochs:

* ``pure``: no teacher; cross-entropy on the labelled samples of each batch only.
* ``same-net``: the teacher network runs inside this process, on this process's cores,
  before every step (EDL's "same-GPU distillation").
* ``service``: teacher logits come from teacher processes over HTTP through the
  :class:`~distill.reader.DistillReader` (static list or a Service's EndpointSlices).

Every mode trains on the same batches (same images, same augmentation, same order), so
the per-step compute of the student is identical and samples/s are comparable. The
result JSON records accuracy and samples/s per epoch, the sample accounting (lost and
duplicated samples), the reader's counters and a throughput timeline.
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import os
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np
import torch

from distill.data import Batch, StreamSettings, iter_epoch, load_fashion_mnist, make_split, steps_per_epoch
from distill.discovery import EndpointSliceSettings, EndpointSliceTeachers, StaticTeachers, TeacherSource
from distill.models import STUDENT_CONFIG, ConvNet, NetConfig, distillation_loss, evaluate, load_checkpoint
from distill.pinning import parse_cpus, pin
from distill.reader import DistillReader, ReaderSettings
from distill.train_teacher import default_checkpoint

log = logging.getLogger("distill.student")

MODES = ("pure", "same-net", "service")


@dataclass(frozen=True)
class StudentSettings:
    """One training run. Identical settings across modes = identical data and steps.

    Attributes:
        mode: ``pure`` (labels only), ``same-net`` (the teacher in this process) or ``service``
            (teachers over HTTP).
        seed: student seed (initialisation, stream order, augmentation).
        epochs: passes over the unlabelled images.
        labelled: labelled training images (class balanced), images.
        unlabelled: cap on unlabelled images per epoch; None: the other 58,000.
        stream: batch shape (images per batch, labelled per batch, augmentation).
        lr: AdamW peak learning rate of the one-cycle schedule.
        temperature: distillation temperature T (dimensionless; soft term weighted by T²).
        alpha: weight (0..1) of the soft (teacher) term on labelled samples; 1 - alpha for the labels.
        split_seed: seed of the labelled/unlabelled split (fixed so every mode sees the same images).
        net: the student network's shape.
        checkpoint: teacher for same-net; None: the cached one.
        teachers: service mode: static teacher URLs (``http://host:port``).
        k8s_service: service mode: ``namespace/name`` whose EndpointSlices list the teachers.
        kubeconfig: kubeconfig path for ``k8s_service``; None: in-cluster, then ``~/.kube/config``.
        port_name: the Service port to use (None: the first port).
        reader: the teacher client's knobs.
        cpus: cores to pin this process to; None: no pinning.
        threads: torch intra-op threads.
        progress_file: JSON lines ``{t, samples}`` written while training (for the bench); None: none.
        eval_each_epoch: False: evaluate only after the last epoch (quick runs).
        test_images: evaluate on the first N test images, images; None: all 10,000.
        dataset_dir: folder of the Fashion-MNIST idx files; None: ``$HOLLOWSCALE_FASHION_MNIST``,
            then Debian's ``dataset-fashion-mnist``.
    """

    mode: str = "pure"
    seed: int = 0
    epochs: int = 2
    labelled: int = 2000  # labelled training images (class balanced)
    unlabelled: int | None = None  # cap on unlabelled images (None: the other 58,000)
    stream: StreamSettings = field(default_factory=StreamSettings)
    lr: float = 3e-3  # AdamW peak, one-cycle schedule
    temperature: float = 4.0
    alpha: float = 0.9  # weight of the soft (teacher) term on labelled samples
    split_seed: int = 1234
    net: NetConfig = STUDENT_CONFIG
    checkpoint: Path | None = None  # teacher for same-net (default: the cached one)
    teachers: tuple[str, ...] = ()  # service: static teacher URLs
    k8s_service: str | None = None  # service: "namespace/name" whose EndpointSlices list teachers
    kubeconfig: str | None = None
    port_name: str | None = None
    reader: ReaderSettings = field(default_factory=ReaderSettings)
    cpus: set[int] | None = None
    threads: int = 1
    progress_file: Path | None = None  # JSON lines {t, samples} while training (for the bench)
    eval_each_epoch: bool = True  # False: evaluate only after the last epoch (quick runs)
    test_images: int | None = None  # evaluate on the first N test images (None: all 10,000)
    dataset_dir: Path | None = None

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}")
        if self.mode == "service" and not (self.teachers or self.k8s_service):
            raise ValueError("service mode needs --teachers or --k8s-service")


class Progress:
    """Throughput timeline: (wall time, samples so far) at most every ``period_s``."""

    def __init__(self, path: Path | None, period_s: float = 0.1) -> None:
        self.period_s = period_s
        self.points: list[tuple[float, int]] = []
        self._last = 0.0
        self._fh: IO[str] | None = path.open("w", buffering=1) if path else None

    def update(self, samples: int, epoch: int, force: bool = False) -> None:
        now = time.time()
        if force or now - self._last >= self.period_s:
            self._last = now
            self.points.append((round(now, 3), samples))
            if self._fh is not None:
                self._fh.write(json.dumps({"t": now, "samples": samples, "epoch": epoch}) + "\n")

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()


def _teacher_source(s: StudentSettings) -> TeacherSource:
    if s.k8s_service:
        ns, _, name = s.k8s_service.partition("/")
        if not name:
            raise ValueError("--k8s-service takes namespace/name")
        return EndpointSliceTeachers(EndpointSliceSettings(ns, name, s.kubeconfig, s.port_name))
    return StaticTeachers(s.teachers)


def train(s: StudentSettings) -> dict[str, Any]:
    """Run one training and return the result document (also what ``--out`` writes)."""
    pinned = pin(s.cpus, s.threads)
    started = time.time()
    ds = load_fashion_mnist(s.dataset_dir)
    split = make_split(ds, s.labelled, s.unlabelled, s.split_seed)
    test_x, test_y = split.test_x[: s.test_images], split.test_y[: s.test_images]
    n_steps = steps_per_epoch(split, s.stream)
    expected_samples = s.epochs * n_steps * s.stream.batch_size
    torch.manual_seed(s.seed)
    np.random.seed(s.seed)
    net = ConvNet(s.net)
    net.train()
    opt = torch.optim.AdamW(net.parameters(), lr=s.lr, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=s.lr, total_steps=max(1, s.epochs * n_steps))

    batches: Iterator[Batch] = itertools.chain.from_iterable(
        iter_epoch(split, s.stream, s.seed, e) for e in range(s.epochs)
    )
    teacher_meta: dict[str, Any] = {}
    reader: DistillReader | None = None
    stream: Iterable[tuple[Batch, np.ndarray | None]]
    same_net_teacher: ConvNet | None = None
    if s.mode == "pure":
        stream = ((b, None) for b in batches)
    elif s.mode == "same-net":
        ckpt = load_checkpoint(s.checkpoint or default_checkpoint())
        teacher_meta = ckpt.meta
        same_net_teacher = ckpt.build()
        stream = ((b, None) for b in batches)  # logits computed in the loop, on this core
    else:
        reader = DistillReader(batches, _teacher_source(s), s.reader)
        reader.start()
        stream = reader

    progress = Progress(s.progress_file)
    epochs_out: list[dict[str, Any]] = []
    seen: set[tuple[int, int]] = set()
    eval_intervals: list[tuple[float, float]] = []
    eval_cpu_main = eval_cpu_proc = 0.0  # evaluation is not training: its CPU is subtracted
    load_start = os.getloadavg()
    duplicates = 0
    trained = 0
    epoch = 0
    epoch_samples = 0
    epoch_train_s = 0.0
    epoch_teacher_s = 0.0
    total_train_s = 0.0
    wait_mark = 0.0
    log.info(
        "mode=%s seed=%d epochs=%d steps/epoch=%d batch=%d (%d labelled) pinned=%s",
        s.mode,
        s.seed,
        s.epochs,
        n_steps,
        s.stream.batch_size,
        s.stream.labelled_per_batch,
        pinned,
    )

    def end_epoch() -> None:
        nonlocal epoch_samples, epoch_train_s, epoch_teacher_s, wait_mark
        nonlocal eval_cpu_main, eval_cpu_proc
        t_eval = time.time()
        c_main, c_proc = time.thread_time(), time.process_time()
        last = epoch + 1 == s.epochs
        acc = evaluate(net, test_x, test_y) if (s.eval_each_epoch or last) else float("nan")
        eval_intervals.append((round(t_eval, 3), round(time.time(), 3)))
        eval_cpu_main += time.thread_time() - c_main
        eval_cpu_proc += time.process_time() - c_proc
        wait_now = reader.stats.consumer_wait_s if reader else 0.0
        rec = {
            "epoch": epoch + 1,
            "test_accuracy": acc,
            "samples": epoch_samples,
            "train_s": round(epoch_train_s, 3),
            "samples_per_s": epoch_samples / epoch_train_s if epoch_train_s else 0.0,
            "teacher_s_in_process": round(epoch_teacher_s, 3),
            "waited_for_teacher_s": round(wait_now - wait_mark, 3),
        }
        wait_mark = wait_now
        epochs_out.append(rec)
        log.info(
            "epoch %d/%d: test accuracy %.4f, %.0f samples/s (train %.1fs, waited %.1fs for teachers)",
            rec["epoch"],
            s.epochs,
            acc,
            rec["samples_per_s"],
            epoch_train_s,
            rec["waited_for_teacher_s"],
        )
        epoch_samples, epoch_train_s, epoch_teacher_s = 0, 0.0, 0.0

    t_last = time.perf_counter()
    cpu_main0, cpu_proc0 = time.thread_time(), time.process_time()
    try:
        for batch, logits in stream:
            if batch.epoch != epoch:
                end_epoch()
                epoch = batch.epoch
                t_last = time.perf_counter()  # evaluation is not training time
            key = (batch.epoch, batch.step)
            if key in seen:
                duplicates += batch.size
            seen.add(key)
            x = torch.from_numpy(batch.x)
            y = torch.from_numpy(batch.y)
            lab = torch.from_numpy(batch.labelled)
            t_logits: torch.Tensor | None = None
            if same_net_teacher is not None:
                tt = time.perf_counter()
                with torch.inference_mode():
                    t_logits = same_net_teacher(x).clone()
                epoch_teacher_s += time.perf_counter() - tt
            elif logits is not None:
                t_logits = torch.from_numpy(np.array(logits, copy=True))
            loss = distillation_loss(net(x), t_logits, y, lab, s.temperature, s.alpha)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            now = time.perf_counter()
            epoch_train_s += now - t_last
            total_train_s += now - t_last
            t_last = now
            trained += batch.size
            epoch_samples += batch.size
            progress.update(trained, epoch)
        progress.update(trained, epoch, force=True)
        cpu_main = time.thread_time() - cpu_main0 - eval_cpu_main
        cpu_proc = time.process_time() - cpu_proc0 - eval_cpu_proc
        end_epoch()
    finally:
        progress.close()
        if reader is not None:
            reader.close()

    expected_keys = {(e, i) for e in range(s.epochs) for i in range(n_steps)}
    missing_batches = len(expected_keys - seen)
    result: dict[str, Any] = {
        "mode": s.mode,
        "seed": s.seed,
        "settings": _settings_json(s),
        "pinning": pinned,
        "torch_version": torch.__version__,
        "started_at": started,
        "finished_at": time.time(),
        "epochs": epochs_out,
        "test_accuracy": epochs_out[-1]["test_accuracy"] if epochs_out else 0.0,
        "samples_per_s": trained / total_train_s if total_train_s else 0.0,
        "train_s": round(total_train_s, 3),
        # CPU seconds of the training thread vs the whole process during training: the
        # difference is what the reader (HTTP, encoding, batching) costs on the student's cores.
        "cpu_s_training_thread": round(cpu_main, 3),
        "cpu_s_process": round(cpu_proc, 3),
        "expected_samples": expected_samples,
        "trained_samples": trained,
        "lost_samples": expected_samples - trained + duplicates,
        "missing_batches": missing_batches,
        "duplicate_samples": duplicates,
        "teacher_checkpoint_meta": teacher_meta,
        "timeline": progress.points,
        "eval_intervals": eval_intervals,
        "loadavg_start": [round(v, 2) for v in load_start],
        "loadavg_end": [round(v, 2) for v in os.getloadavg()],
    }
    if reader is not None:
        result["reader"] = reader.result_json()
        result["teacher_source"] = reader.source.describe()
    return result


def _settings_json(s: StudentSettings) -> dict[str, Any]:
    d = asdict(s)
    d["cpus"] = sorted(s.cpus) if s.cpus else None
    for k in ("checkpoint", "progress_file", "dataset_dir"):
        d[k] = str(d[k]) if d[k] is not None else None
    return d


def parse_args(argv: list[str] | None = None) -> tuple[StudentSettings, Path | None]:
    d = StudentSettings()
    r = ReaderSettings()
    p = argparse.ArgumentParser(
        prog="python -m distill.student",
        description=(
            "Train the small student on Fashion-MNIST with a small labelled subset plus "
            "teacher-labelled images. --mode pure (no teacher), same-net (teacher in this "
            "process, on these cores) or service (teacher processes over HTTP). Logs accuracy "
            "and samples/s per epoch and writes a JSON result."
        ),
    )
    p.add_argument("--mode", choices=MODES, required=True)
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument(
        "--epochs", type=int, default=d.epochs, help="passes over the unlabelled images (default %(default)s)"
    )
    p.add_argument("--labelled", type=int, default=d.labelled, help="labelled images (default %(default)s)")
    p.add_argument("--unlabelled", type=int, help="cap on unlabelled images (default: all the rest)")
    p.add_argument("--batch-size", type=int, default=d.stream.batch_size)
    p.add_argument("--labelled-per-batch", type=int, default=d.stream.labelled_per_batch)
    p.add_argument("--no-augment", action="store_true", help="disable the random shift/flip augmentation")
    p.add_argument("--lr", type=float, default=d.lr)
    p.add_argument("--temperature", "-T", type=float, default=d.temperature)
    p.add_argument("--alpha", type=float, default=d.alpha, help="soft-term weight (default %(default)s)")
    p.add_argument("--checkpoint", type=Path, help="teacher checkpoint for same-net mode")
    p.add_argument("--teachers", default="", help="service: comma separated teacher URLs (host:port or http://...)")
    p.add_argument("--k8s-service", help="service: namespace/name of a Service whose EndpointSlices list the teachers")
    p.add_argument("--kubeconfig", help="kubeconfig for --k8s-service (default: in-cluster, then ~/.kube/config)")
    p.add_argument("--port-name", help="EndpointSlice port name to use (default: the first port)")
    p.add_argument(
        "--window", type=int, default=r.window, help="reader prefetch window in batches (default %(default)s)"
    )
    p.add_argument("--per-teacher-inflight", type=int, default=r.per_teacher_inflight)
    p.add_argument(
        "--request-timeout", type=float, default=r.request_timeout_s, help="seconds before a retry elsewhere"
    )
    p.add_argument("--cpus", help='pin to these cores, e.g. "0" (default: no pinning)')
    p.add_argument("--threads", type=int, default=d.threads, help="torch threads (default %(default)s)")
    p.add_argument("--progress-file", type=Path, help="append {t, samples} JSON lines while training")
    p.add_argument("--dataset-dir", type=Path, help="directory with the Fashion-MNIST idx files")
    p.add_argument("--eval-last-only", action="store_true", help="evaluate only after the last epoch")
    p.add_argument("--test-images", type=int, help="evaluate on the first N test images (default: all)")
    p.add_argument("--out", type=Path, help="write the JSON result here")
    p.add_argument("--log-level", default="INFO")
    a = p.parse_args(argv)
    logging.basicConfig(level=a.log_level.upper(), format="%(asctime)s student[%(process)d] %(levelname)s %(message)s")
    s = StudentSettings(
        mode=a.mode,
        seed=a.seed,
        epochs=a.epochs,
        labelled=a.labelled,
        unlabelled=a.unlabelled,
        stream=StreamSettings(a.batch_size, a.labelled_per_batch, not a.no_augment),
        lr=a.lr,
        temperature=a.temperature,
        alpha=a.alpha,
        checkpoint=a.checkpoint,
        teachers=tuple(u for u in a.teachers.split(",") if u.strip()),
        k8s_service=a.k8s_service,
        kubeconfig=a.kubeconfig,
        port_name=a.port_name,
        reader=ReaderSettings(
            window=a.window, per_teacher_inflight=a.per_teacher_inflight, request_timeout_s=a.request_timeout
        ),
        cpus=parse_cpus(a.cpus),
        threads=a.threads,
        progress_file=a.progress_file,
        eval_each_epoch=not a.eval_last_only,
        test_images=a.test_images,
        dataset_dir=a.dataset_dir,
    )
    return s, a.out


def main(argv: list[str] | None = None) -> int:
    from distill.data import DatasetMissingError

    try:
        settings, out = parse_args(argv)
        result = train(settings)
    except (DatasetMissingError, FileNotFoundError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=1))
    print(
        json.dumps(
            {
                k: result[k]
                for k in ("mode", "seed", "test_accuracy", "samples_per_s", "lost_samples", "duplicate_samples")
            }
        )
    )
    return 0 if result["lost_samples"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
