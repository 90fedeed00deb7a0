"""Fashion-MNIST loading, the labelled/unlabelled split and the deterministic batch stream.

Why this module exists: every training mode (pure, same-net, service) must see *identical*
batches in the same order with the same augmentation, otherwise the accuracy and
throughput comparisons of the benchmark would mean nothing. So the stream is a pure
function of ``(split, seed, epoch)`` and nothing else.

Images stay ``uint8`` (0..255) everywhere outside the models: that is what goes over the
wire to the teachers (784 bytes per image) and the models normalise on the way in.
"""

from __future__ import annotations

import gzip
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

DATASET_DIR_ENV = "HOLLOWSCALE_FASHION_MNIST"
DEFAULT_DATASET_DIR = Path("/usr/share/datasets/fashion-mnist")
INSTALL_HINT = "sudo apt-get install -y dataset-fashion-mnist"
IMAGE_SHAPE = (1, 28, 28)
NUM_CLASSES = 10

_FILES = {
    "train_images": "train-images-idx3-ubyte",
    "train_labels": "train-labels-idx1-ubyte",
    "test_images": "t10k-images-idx3-ubyte",
    "test_labels": "t10k-labels-idx1-ubyte",
}


class DatasetMissingError(RuntimeError):
    """Raised when the idx files are not where we look; the message is one actionable line."""


@dataclass(frozen=True)
class Dataset:
    """Raw arrays: images ``uint8 [N,1,28,28]``, labels ``int64 [N]``."""

    train_x: np.ndarray
    train_y: np.ndarray
    test_x: np.ndarray
    test_y: np.ndarray


@dataclass(frozen=True)
class Split:
    """The semi-supervised protocol: few labelled images, many that only the teacher labels.

    ``unlabelled_y`` is kept only for diagnostics (e.g. teacher accuracy on that data); the
    student never reads it.
    """

    labelled_x: np.ndarray
    labelled_y: np.ndarray
    unlabelled_x: np.ndarray
    unlabelled_y: np.ndarray
    test_x: np.ndarray
    test_y: np.ndarray


@dataclass(frozen=True)
class StreamSettings:
    """Shape of the training stream.

    Each batch holds ``labelled_per_batch`` labelled images (cycled through the labelled
    subset, reshuffled whenever it wraps) and ``batch_size - labelled_per_batch``
    unlabelled ones. One epoch is one pass over the unlabelled images, so every mode runs
    exactly the same number of steps per epoch.

    Attributes:
        batch_size: images per student step.
        labelled_per_batch: labelled images in each batch (0 < labelled_per_batch < batch_size).
        augment: random ±2 px shift and horizontal flip, seeded per batch.
    """

    batch_size: int = 128
    labelled_per_batch: int = 32
    augment: bool = True  # random +-2 px shift and horizontal flip, seeded per batch

    def __post_init__(self) -> None:
        if not 0 < self.labelled_per_batch < self.batch_size:
            raise ValueError("need 0 < labelled_per_batch < batch_size")


@dataclass
class Batch:
    """One student step. ``y`` is -1 for unlabelled samples; ``labelled`` is the mask."""

    epoch: int
    step: int
    x: np.ndarray  # uint8 [B,1,28,28]
    y: np.ndarray  # int64 [B]
    labelled: np.ndarray  # bool [B]

    @property
    def size(self) -> int:
        return int(self.x.shape[0])


def dataset_dir(path: str | os.PathLike[str] | None = None) -> Path:
    """Where the idx files live: explicit path, then $HOLLOWSCALE_FASHION_MNIST, then Debian's."""
    if path is not None:
        return Path(path)
    env = os.environ.get(DATASET_DIR_ENV)
    return Path(env) if env else DEFAULT_DATASET_DIR


def _open_idx(directory: Path, stem: str) -> bytes:
    for name in (stem, stem + ".gz"):
        p = directory / name
        if p.exists():
            data = p.read_bytes()
            return gzip.decompress(data) if name.endswith(".gz") else data
    raise DatasetMissingError(
        f"Fashion-MNIST not found in {directory} (missing {stem}[.gz]); install it with: {INSTALL_HINT}"
    )


def parse_idx(raw: bytes) -> np.ndarray:
    """Decode an idx file (the MNIST container format); only ubyte payloads exist here."""
    if len(raw) < 4:
        raise ValueError("idx file too short")
    zero, dtype_code, ndim = struct.unpack(">HBB", raw[:4])
    if zero != 0 or dtype_code != 0x08:
        raise ValueError(f"unsupported idx header (magic {zero:#x}, dtype {dtype_code:#x})")
    dims = struct.unpack(">" + "I" * ndim, raw[4 : 4 + 4 * ndim])
    payload = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    expected = int(np.prod(dims))
    if payload.size != expected:
        raise ValueError(f"idx payload has {payload.size} bytes, header says {expected}")
    return payload.reshape(dims)


def load_fashion_mnist(path: str | os.PathLike[str] | None = None) -> Dataset:
    """Load the four idx files; raises :class:`DatasetMissingError` with the install command."""
    d = dataset_dir(path)
    arrays = {k: parse_idx(_open_idx(d, v)) for k, v in _FILES.items()}
    train_x = arrays["train_images"].reshape(-1, *IMAGE_SHAPE)
    test_x = arrays["test_images"].reshape(-1, *IMAGE_SHAPE)
    train_y = arrays["train_labels"].astype(np.int64)
    test_y = arrays["test_labels"].astype(np.int64)
    if len(train_x) != len(train_y) or len(test_x) != len(test_y):
        raise ValueError(f"image/label count mismatch in {d}")
    return Dataset(np.ascontiguousarray(train_x), train_y, np.ascontiguousarray(test_x), test_y)


def make_split(ds: Dataset, labelled: int = 2000, unlabelled: int | None = None, split_seed: int = 1234) -> Split:
    """Class-balanced labelled subset; the rest (optionally capped) becomes unlabelled.

    The split seed is fixed and independent of the training seed, so the three seeds of
    the benchmark vary initialisation and order, not which images carry labels.
    """
    rng = np.random.default_rng(split_seed)
    n = len(ds.train_y)
    if not 0 < labelled < n:
        raise ValueError(f"labelled must be in 1..{n - 1}")
    per_class = labelled // NUM_CLASSES
    chosen: list[np.ndarray] = []
    for c in range(NUM_CLASSES):
        idx = np.flatnonzero(ds.train_y == c)
        chosen.append(rng.choice(idx, size=min(per_class, len(idx)), replace=False))
    lab = np.concatenate(chosen)
    rest_needed = labelled - len(lab)
    mask = np.ones(n, dtype=bool)
    mask[lab] = False
    if rest_needed > 0:
        extra = rng.choice(np.flatnonzero(mask), size=rest_needed, replace=False)
        lab = np.concatenate([lab, extra])
        mask[extra] = False
    lab = np.sort(lab)
    unl = np.flatnonzero(mask)
    if unlabelled is not None:
        unl = np.sort(rng.choice(unl, size=min(unlabelled, len(unl)), replace=False))
    return Split(
        labelled_x=ds.train_x[lab],
        labelled_y=ds.train_y[lab],
        unlabelled_x=ds.train_x[unl],
        unlabelled_y=ds.train_y[unl],
        test_x=ds.test_x,
        test_y=ds.test_y,
    )


def steps_per_epoch(split: Split, settings: StreamSettings) -> int:
    """Number of student steps in one epoch (the last partial batch is dropped)."""
    return len(split.unlabelled_x) // (settings.batch_size - settings.labelled_per_batch)


def augment(x: np.ndarray, rng: np.random.Generator, max_shift: int = 2) -> np.ndarray:
    """Random shift (zero padded) and horizontal flip, on uint8 images [B,1,28,28].

    Augmentation is what makes *online* distillation necessary: the teacher must label
    each augmented view afresh, so its logits cannot simply be cached once per image.
    """
    b, _, h, w = x.shape
    padded = np.zeros((b, 1, h + 2 * max_shift, w + 2 * max_shift), dtype=x.dtype)
    padded[:, :, max_shift : max_shift + h, max_shift : max_shift + w] = x
    dy = np.asarray(rng.integers(0, 2 * max_shift + 1, size=b), dtype=np.int64)
    dx = np.asarray(rng.integers(0, 2 * max_shift + 1, size=b), dtype=np.int64)
    out = np.empty_like(x)
    for i in range(b):
        y0, x0 = int(dy[i]), int(dx[i])
        out[i] = padded[i, :, y0 : y0 + h, x0 : x0 + w]
    flip = rng.random(b) < 0.5
    out[flip] = out[flip][..., ::-1]
    return out


def iter_epoch(split: Split, settings: StreamSettings, seed: int, epoch: int) -> Iterator[Batch]:
    """The deterministic stream of one epoch: a function of (split, settings, seed, epoch) only."""
    n_unl_per_batch = settings.batch_size - settings.labelled_per_batch
    n_steps = steps_per_epoch(split, settings)
    order_rng = np.random.default_rng([seed, epoch, 0])
    unl_order = order_rng.permutation(len(split.unlabelled_x))
    n_lab = len(split.labelled_x)
    # Labelled cursor continues across epochs so every labelled image is used equally often.
    lab_pos = (epoch * n_steps * settings.labelled_per_batch) % n_lab
    lab_cycle = (epoch * n_steps * settings.labelled_per_batch) // n_lab
    lab_order = np.random.default_rng([seed, lab_cycle, 1]).permutation(n_lab)
    for step in range(n_steps):
        lab_idx = np.empty(settings.labelled_per_batch, dtype=np.int64)
        for j in range(settings.labelled_per_batch):
            if lab_pos == n_lab:
                lab_pos = 0
                lab_cycle += 1
                lab_order = np.random.default_rng([seed, lab_cycle, 1]).permutation(n_lab)
            lab_idx[j] = lab_order[lab_pos]
            lab_pos += 1
        unl_idx = unl_order[step * n_unl_per_batch : (step + 1) * n_unl_per_batch]
        x = np.concatenate([split.labelled_x[lab_idx], split.unlabelled_x[unl_idx]])
        y = np.concatenate([split.labelled_y[lab_idx], np.full(len(unl_idx), -1, dtype=np.int64)])
        labelled = y >= 0
        if settings.augment:
            x = augment(x, np.random.default_rng([seed, epoch, step, 2]))
        yield Batch(epoch=epoch, step=step, x=np.ascontiguousarray(x), y=y, labelled=labelled)


def synthetic_dataset(n_train: int = 600, n_test: int = 200, seed: int = 0) -> Dataset:
    """A tiny generated dataset with learnable class structure, for unit tests only."""
    rng = np.random.default_rng(seed)
    protos = rng.integers(0, 256, size=(NUM_CLASSES, *IMAGE_SHAPE)).astype(np.float32)

    def draw(n: int) -> tuple[np.ndarray, np.ndarray]:
        y = rng.integers(0, NUM_CLASSES, size=n)
        noise = rng.normal(0, 40, size=(n, *IMAGE_SHAPE))
        x = np.clip(protos[y] + noise, 0, 255).astype(np.uint8)
        return x, y.astype(np.int64)

    tx, ty = draw(n_train)
    vx, vy = draw(n_test)
    return Dataset(tx, ty, vx, vy)
