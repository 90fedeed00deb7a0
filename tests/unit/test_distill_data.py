"""Dataset loading, its error, the split and the deterministic stream (generated data only)."""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import numpy as np
import pytest

from distill.data import (
    INSTALL_HINT,
    DatasetMissingError,
    StreamSettings,
    augment,
    iter_epoch,
    load_fashion_mnist,
    make_split,
    parse_idx,
    steps_per_epoch,
    synthetic_dataset,
)


def _idx(arr: np.ndarray) -> bytes:
    return struct.pack(">HBB", 0, 0x08, arr.ndim) + struct.pack(">" + "I" * arr.ndim, *arr.shape) + arr.tobytes()


def _write_dataset(d: Path, n_train: int = 50, n_test: int = 20, gz: bool = True) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    tx = rng.integers(0, 256, (n_train, 28, 28), dtype=np.uint8)
    ty = rng.integers(0, 10, n_train).astype(np.uint8)
    vx = rng.integers(0, 256, (n_test, 28, 28), dtype=np.uint8)
    vy = rng.integers(0, 10, n_test).astype(np.uint8)
    files = {
        "train-images-idx3-ubyte": tx,
        "train-labels-idx1-ubyte": ty,
        "t10k-images-idx3-ubyte": vx,
        "t10k-labels-idx1-ubyte": vy,
    }
    for name, arr in files.items():
        raw = _idx(arr)
        if gz:
            (d / (name + ".gz")).write_bytes(gzip.compress(raw))
        else:
            (d / name).write_bytes(raw)
    return tx, ty


@pytest.mark.parametrize("gz", [True, False])
def test_load_reads_idx_files_plain_or_gzipped(tmp_path: Path, gz: bool) -> None:
    tx, ty = _write_dataset(tmp_path, gz=gz)
    ds = load_fashion_mnist(tmp_path)
    assert ds.train_x.shape == (50, 1, 28, 28) and ds.train_x.dtype == np.uint8
    assert ds.test_x.shape == (20, 1, 28, 28)
    np.testing.assert_array_equal(ds.train_x[:, 0], tx)
    np.testing.assert_array_equal(ds.train_y, ty.astype(np.int64))


def test_missing_dataset_is_one_line_with_the_install_command(tmp_path: Path) -> None:
    with pytest.raises(DatasetMissingError) as e:
        load_fashion_mnist(tmp_path / "nowhere")
    msg = str(e.value)
    assert "\n" not in msg
    assert INSTALL_HINT in msg and "dataset-fashion-mnist" in msg


def test_env_var_points_at_the_dataset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _write_dataset(tmp_path)
    monkeypatch.setenv("HOLLOWSCALE_FASHION_MNIST", str(tmp_path))
    assert load_fashion_mnist().train_x.shape[0] == 50


def test_parse_idx_rejects_corrupt_files() -> None:
    raw = _idx(np.zeros((3, 4), dtype=np.uint8))
    with pytest.raises(ValueError, match="payload"):
        parse_idx(raw[:-1])
    with pytest.raises(ValueError, match="header"):
        parse_idx(b"\x01\x02\x08\x01" + raw[4:])


def test_split_is_balanced_disjoint_and_independent_of_training_seed() -> None:
    ds = synthetic_dataset(n_train=1000, n_test=50)
    sp = make_split(ds, labelled=100)
    assert len(sp.labelled_x) == 100 and len(sp.unlabelled_x) == 900
    counts = np.bincount(sp.labelled_y, minlength=10)
    assert counts.min() >= 8  # class balanced (the generator's classes are roughly uniform)
    # disjoint: every training image is in exactly one side
    joined = np.concatenate([sp.labelled_x, sp.unlabelled_x]).reshape(1000, -1)
    assert len({r.tobytes() for r in joined}) == len({r.tobytes() for r in ds.train_x.reshape(1000, -1)})
    again = make_split(ds, labelled=100)
    np.testing.assert_array_equal(sp.labelled_y, again.labelled_y)
    capped = make_split(ds, labelled=100, unlabelled=300)
    assert len(capped.unlabelled_x) == 300


def test_stream_is_deterministic_and_covers_each_unlabelled_image_once() -> None:
    ds = synthetic_dataset(n_train=1000, n_test=10)
    sp = make_split(ds, labelled=100)
    st = StreamSettings(batch_size=32, labelled_per_batch=8, augment=False)
    a = list(iter_epoch(sp, st, seed=3, epoch=0))
    b = list(iter_epoch(sp, st, seed=3, epoch=0))
    c = list(iter_epoch(sp, st, seed=4, epoch=0))
    assert len(a) == steps_per_epoch(sp, st) == 900 // 24
    assert all(np.array_equal(x.x, y.x) for x, y in zip(a, b, strict=True))
    assert not all(np.array_equal(x.x, y.x) for x, y in zip(a, c, strict=True))
    for batch in a:
        assert batch.size == 32 and batch.labelled.sum() == 8
        assert (batch.y[batch.labelled] >= 0).all() and (batch.y[~batch.labelled] == -1).all()
    unl = np.concatenate([bt.x[~bt.labelled] for bt in a]).reshape(-1, 784)
    assert len({r.tobytes() for r in unl}) == len(unl)  # no unlabelled image twice in an epoch


def test_augment_keeps_shape_dtype_and_is_seeded() -> None:
    x = synthetic_dataset(n_train=16, n_test=1).train_x
    a = augment(x, np.random.default_rng(1))
    b = augment(x, np.random.default_rng(1))
    assert a.shape == x.shape and a.dtype == np.uint8
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, x)
