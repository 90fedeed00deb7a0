"""Reader semantics against real teacher subprocesses on 127.0.0.1: work sharing, failover,
timeouts, no loss, no duplicates, waiting with no teacher, teachers added and removed."""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch

from distill.data import Batch, StreamSettings, iter_epoch, make_split, synthetic_dataset
from distill.discovery import StaticTeachers
from distill.models import ConvNet, NetConfig, load_checkpoint, save_checkpoint
from distill.procs import TeacherProcess
from distill.reader import DistillReader, ReaderSettings

TINY = NetConfig(channels=(4, 8), convs_per_stage=1, hidden=16)
pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch.manual_seed(0)
    p = tmp_path_factory.mktemp("ckpt") / "tiny.pt"
    save_checkpoint(ConvNet(TINY), p)
    return p


@pytest.fixture(scope="module")
def _pool(checkpoint: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[TeacherProcess]]:
    d = tmp_path_factory.mktemp("teachers")
    ts = [TeacherProcess(checkpoint, d, f"t{i}") for i in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.wait_ready(120)
    yield ts
    for t in ts:
        if t.proc is not None and t.proc.poll() is None:
            os.kill(t.proc.pid, signal.SIGCONT)
        t.stop()


@pytest.fixture
def teachers(_pool: list[TeacherProcess]) -> list[TeacherProcess]:
    """Both teachers alive and serving (a test before may have killed or stopped one)."""
    for t in _pool:
        assert t.proc is not None
        if t.proc.poll() is None:
            os.kill(t.proc.pid, signal.SIGCONT)
        else:
            t.start()
            t.wait_ready(120)
    return _pool


@pytest.fixture(scope="module")
def stream() -> list[Batch]:
    sp = make_split(synthetic_dataset(n_train=2600, n_test=10), labelled=200)
    return list(iter_epoch(sp, StreamSettings(batch_size=32, labelled_per_batch=8), seed=0, epoch=0))  # 100 batches


@pytest.fixture(scope="module")
def expected(stream: list[Batch], checkpoint: Path) -> list[np.ndarray]:
    net = load_checkpoint(checkpoint).build()
    with torch.inference_mode():
        return [net(torch.from_numpy(b.x)).numpy() for b in stream]


def consume(reader: DistillReader, on_batch: object = None, delay_s: float = 0.0) -> list[tuple[Batch, np.ndarray]]:
    out = []
    for i, (b, logits) in enumerate(reader):
        out.append((b, logits))
        if callable(on_batch):
            on_batch(i)
        if delay_s:
            time.sleep(delay_s)
    return out


def check_exactly_once(got: list[tuple[Batch, np.ndarray]], stream: list[Batch], expected: list[np.ndarray]) -> None:
    assert [b.step for b, _ in got] == [b.step for b in stream], "batches lost, duplicated or out of order"
    for (_, logits), want in zip(got, expected, strict=True):
        np.testing.assert_allclose(logits, want, rtol=1e-4, atol=1e-5)


def test_two_teachers_share_the_work_exactly_once_in_order(
    teachers: list[TeacherProcess], stream: list[Batch], expected: list[np.ndarray]
) -> None:
    with DistillReader(stream, StaticTeachers([t.url for t in teachers]), ReaderSettings(window=8)) as r:
        got = consume(r)
    check_exactly_once(got, stream, expected)
    st = r.result_json()
    assert st["lost_samples"] == 0 and st["duplicate_results_dropped"] == 0
    assert st["delivered_samples"] == sum(b.size for b in stream)
    served = [st["teachers"][t.url]["samples_ok"] for t in teachers]
    assert sum(served) == st["delivered_samples"]
    assert all(s > 0 for s in served), f"work-stealing should use both teachers: {served}"


def test_killed_teacher_mid_stream_loses_no_sample(
    teachers: list[TeacherProcess], stream: list[Batch], expected: list[np.ndarray]
) -> None:
    victim = teachers[1]

    def kill_at(i: int) -> None:
        if i == 10:
            victim.kill()

    with DistillReader(stream, StaticTeachers([t.url for t in teachers]), ReaderSettings(window=16)) as r:
        got = consume(r, kill_at)
    check_exactly_once(got, stream, expected)
    st = r.result_json()
    assert st["lost_samples"] == 0
    assert st["retries"] >= 1 and st["teachers"][victim.url]["failures"] >= 1
    assert any(e["event"] == "down" and e["teacher"] == victim.url for e in st["events"])


def test_hung_teacher_times_out_and_its_work_moves(
    teachers: list[TeacherProcess], stream: list[Batch], expected: list[np.ndarray]
) -> None:
    victim = teachers[0]
    assert victim.proc is not None
    pid = victim.proc.pid

    def hang_at(i: int) -> None:
        if i == 5:  # both teachers are live and busy by now
            os.kill(pid, signal.SIGSTOP)  # a real hang: the socket accepts, nothing answers

    settings = ReaderSettings(window=8, request_timeout_s=1.0, probe_timeout_s=0.3)
    try:
        with DistillReader(stream[:40], StaticTeachers([t.url for t in teachers]), settings) as r:
            got = consume(r, hang_at)
    finally:
        os.kill(pid, signal.SIGCONT)
    check_exactly_once(got, stream[:40], expected[:40])
    st = r.result_json()
    assert st["lost_samples"] == 0
    assert st["teachers"][victim.url]["timeouts"] >= 1
    assert st["retries"] >= 1
    assert any(e["event"] == "down" and e["teacher"] == victim.url for e in st["events"])


def test_waits_without_teachers_says_so_and_resumes_when_one_appears(
    teachers: list[TeacherProcess], stream: list[Batch], expected: list[np.ndarray], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="distill.reader")
    source = StaticTeachers([])
    got: list[tuple[Batch, np.ndarray]] = []
    with DistillReader(stream[:20], source, ReaderSettings(window=4, wait_log_interval_s=0.3)) as r:
        th = threading.Thread(target=lambda: got.extend(consume(r)))
        th.start()
        time.sleep(1.5)
        assert got == []
        assert r.stats.no_teacher_episodes == 1
        assert "no live teacher" in caplog.text and "still no live teacher" in caplog.text
        source.set([teachers[0].url])
        th.join(60)
    check_exactly_once(got, stream[:20], expected[:20])
    assert r.stats.no_teacher_s >= 1.0
    assert "resuming" in caplog.text


def test_teachers_added_and_removed_while_training(
    teachers: list[TeacherProcess], stream: list[Batch], expected: list[np.ndarray]
) -> None:
    a, b = teachers
    source = StaticTeachers([a.url])
    marks: dict[str, int] = {}

    def change(i: int) -> None:
        if i == 20:
            source.set([a.url, b.url])
        if i == 60:
            marks["a_at_removal"] = r.teachers[a.url].samples_ok
            source.set([b.url])

    with DistillReader(stream, source, ReaderSettings(window=8)) as r:
        got = consume(r, change, delay_s=0.01)
    check_exactly_once(got, stream, expected)
    st = r.result_json()
    assert st["lost_samples"] == 0
    assert st["teachers"][b.url]["samples_ok"] > 0, "the added teacher got no work"
    # after removal, A finishes at most what it already had in flight (2 requests)
    assert st["teachers"][a.url]["samples_ok"] - marks["a_at_removal"] <= 2 * 32
    kinds = [(e["event"], e["teacher"]) for e in st["events"]]
    assert ("added", b.url) in kinds and ("removed", a.url) in kinds
