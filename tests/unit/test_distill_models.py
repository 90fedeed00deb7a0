"""Loss semantics, checkpoints and that the student really learns (generated data)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from distill.data import StreamSettings, iter_epoch, make_split, synthetic_dataset
from distill.models import (
    ConvNet,
    NetConfig,
    distillation_loss,
    evaluate,
    keep_torch_caches_out_of_tmp,
    load_checkpoint,
    save_checkpoint,
)

TINY = NetConfig(channels=(4, 8), convs_per_stage=1, hidden=16)


def test_pure_loss_ignores_unlabelled_samples() -> None:
    torch.manual_seed(0)
    logits = torch.randn(6, 10)
    y = torch.tensor([1, 2, 3, -1, -1, -1])
    lab = y >= 0
    base = distillation_loss(logits, None, y, lab, 4.0, 0.9)
    changed = logits.clone()
    changed[3:] += 5 * torch.randn(3, 10)
    assert torch.allclose(base, distillation_loss(changed, None, y, lab, 4.0, 0.9))
    expected = torch.nn.functional.cross_entropy(logits[:3], y[:3])
    assert torch.allclose(base, expected)


def test_distill_loss_soft_term_on_all_hard_term_on_labelled_only() -> None:
    torch.manual_seed(0)
    s = torch.randn(4, 10)
    y = torch.tensor([0, 5, -1, -1])
    lab = y >= 0
    # teacher == student: KL vanishes, only (1-alpha)*CE on labelled remains, averaged over the batch
    same = distillation_loss(s, s.clone(), y, lab, 3.0, 0.7)
    ce = torch.nn.functional.cross_entropy(s[:2], y[:2], reduction="sum") / 4
    assert torch.allclose(same, 0.3 * ce, atol=1e-6)
    # a different teacher adds alpha*T^2*KL on every sample, unlabelled included
    t = torch.randn(4, 10)
    T = 3.0
    kl = torch.nn.functional.kl_div(
        torch.log_softmax(s / T, 1), torch.log_softmax(t / T, 1), log_target=True, reduction="none"
    ).sum(1)
    full = distillation_loss(s, t, y, lab, T, 0.7)
    assert torch.allclose(full, (0.7 * T * T * kl).mean() + 0.3 * ce, atol=1e-5)


def test_checkpoint_roundtrip_and_missing_hint(tmp_path: Path) -> None:
    net = ConvNet(TINY)
    save_checkpoint(net, tmp_path / "t.pt", {"test_accuracy": 0.5})
    ck = load_checkpoint(tmp_path / "t.pt")
    assert ck.config == TINY and ck.meta["test_accuracy"] == 0.5
    x = torch.randint(0, 255, (3, 1, 28, 28), dtype=torch.uint8)
    net.eval()
    assert torch.allclose(ck.build()(x), net(x))
    with pytest.raises(FileNotFoundError, match="train-teacher"):
        load_checkpoint(tmp_path / "missing.pt")


def test_student_learns_from_a_teacher_on_generated_data() -> None:
    torch.manual_seed(0)
    torch.set_num_threads(1)
    ds = synthetic_dataset(n_train=1200, n_test=300)
    sp = make_split(ds, labelled=50)
    teacher = ConvNet(TINY)
    opt = torch.optim.Adam(teacher.parameters(), 3e-3)
    xs, ys = torch.from_numpy(ds.train_x), torch.from_numpy(ds.train_y)
    for i in list(range(0, 1200, 100)) * 3:
        loss = torch.nn.functional.cross_entropy(teacher(xs[i : i + 100]), ys[i : i + 100])
        opt.zero_grad()
        loss.backward()
        opt.step()
    teacher.eval()
    assert evaluate(teacher, ds.test_x, ds.test_y) > 0.9
    student = ConvNet(TINY)
    sopt = torch.optim.Adam(student.parameters(), 3e-3)
    # random-pixel prototypes are not shift/flip invariant: no augmentation here
    st = StreamSettings(batch_size=64, labelled_per_batch=8, augment=False)
    for epoch in range(2):
        for b in iter_epoch(sp, st, seed=0, epoch=epoch):
            x = torch.from_numpy(b.x)
            with torch.no_grad():
                tl = teacher(x)
            loss = distillation_loss(student(x), tl, torch.from_numpy(b.y), torch.from_numpy(b.labelled), 4.0, 0.9)
            sopt.zero_grad()
            loss.backward()
            sopt.step()
    assert evaluate(student, ds.test_x, ds.test_y) > 0.8


def test_torch_compile_cache_goes_to_hollowscales_cache_not_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Importing torch._dynamo (every optimizer step) makes the compile cache folder: not in /tmp."""
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    monkeypatch.setenv("HOLLOWSCALE_CACHE", str(tmp_path / "cache"))
    folder = tmp_path / "cache" / "distill" / "torchinductor"
    assert keep_torch_caches_out_of_tmp() == str(folder) and folder.is_dir()
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(folder)
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "users-choice"))
    assert keep_torch_caches_out_of_tmp() is None
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    assert cache_dir() == str(tmp_path / "users-choice")  # what torch itself makes and uses
