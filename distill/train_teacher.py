"""Train the teacher once and cache it outside the repository.

The teacher plays the role of EDL's pre-trained ImageNet teacher: it is trained on all
60,000 labelled training images (it was "trained elsewhere"); the *student* is the one
restricted to a small labelled subset plus teacher-labelled images. The checkpoint lives in
``~/.cache/hollowscale/distill/`` (override with $HOLLOWSCALE_CACHE) so a second bench run
trains nothing.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from distill.data import Dataset, augment, load_fashion_mnist
from distill.models import TEACHER_CONFIG, ConvNet, NetConfig, cache_dir, evaluate, save_checkpoint

log = logging.getLogger("distill.train_teacher")


def default_checkpoint(quick: bool = False) -> Path:
    """The full teacher, or the cheaper one that ``bench --quick`` trains when no full one exists."""
    return cache_dir() / ("teacher-quick.pt" if quick else "teacher.pt")


@dataclass(frozen=True)
class TeacherTrainSettings:
    """Teacher training recipe. ``train_images`` caps the images used (quick teachers only)."""

    epochs: int = 12
    batch_size: int = 128
    lr: float = 2e-3  # Adam peak learning rate (one-cycle schedule)
    weight_decay: float = 1e-4
    seed: int = 0
    threads: int = 0  # torch threads; 0 = all cores of this process's affinity
    train_images: int | None = None
    config: NetConfig = TEACHER_CONFIG


def train_teacher(
    out: Path, settings: TeacherTrainSettings = TeacherTrainSettings(), dataset: Dataset | None = None
) -> float:
    """Train, evaluate on the 10k test images, save to ``out``; returns the test accuracy."""
    ds = dataset if dataset is not None else load_fashion_mnist()
    threads = settings.threads or len(os.sched_getaffinity(0))
    torch.set_num_threads(threads)
    torch.manual_seed(settings.seed)
    rng = np.random.default_rng(settings.seed)
    x_all, y_all = ds.train_x, ds.train_y
    if settings.train_images is not None:
        sel = rng.choice(len(x_all), size=min(settings.train_images, len(x_all)), replace=False)
        x_all, y_all = x_all[sel], y_all[sel]
    net = ConvNet(settings.config)
    opt = torch.optim.AdamW(net.parameters(), lr=settings.lr, weight_decay=settings.weight_decay)
    steps = settings.epochs * (len(x_all) // settings.batch_size)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=settings.lr, total_steps=max(1, steps))
    t0 = time.perf_counter()
    acc = 0.0
    for epoch in range(settings.epochs):
        net.train()
        order = rng.permutation(len(x_all))
        te = time.perf_counter()
        for i in range(len(x_all) // settings.batch_size):
            idx = order[i * settings.batch_size : (i + 1) * settings.batch_size]
            xb = torch.from_numpy(augment(x_all[idx], rng))
            yb = torch.from_numpy(y_all[idx])
            loss = F.cross_entropy(net(xb), yb, label_smoothing=0.05)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
        acc = evaluate(net, ds.test_x, ds.test_y)
        log.info(
            "teacher epoch %d/%d: test accuracy %.4f, %.0f img/s",
            epoch + 1,
            settings.epochs,
            acc,
            len(x_all) / (time.perf_counter() - te),
        )
    meta = {
        "test_accuracy": acc,
        "train_seconds": round(time.perf_counter() - t0, 1),
        "torch_threads": threads,
        "torch_version": str(torch.__version__),
        "settings": {k: v for k, v in asdict(settings).items() if k != "config"},
    }
    save_checkpoint(net, out, meta)
    log.info("teacher saved to %s (test accuracy %.4f)", out, acc)
    return acc
