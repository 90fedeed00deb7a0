"""The student and bench entry points as users run them (real subprocesses)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from distill.data import DEFAULT_DATASET_DIR

pytestmark = pytest.mark.integration  # each test runs the student (and teachers) as processes


def test_student_without_dataset_prints_one_line_with_the_install_command(tmp_path: Path) -> None:
    p = subprocess.run(
        [sys.executable, "-m", "distill.student", "--mode", "pure", "--dataset-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 2
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "apt-get install -y dataset-fashion-mnist" in lines[0]


def test_service_mode_rejects_teacher_addresses_without_port() -> None:
    p = subprocess.run(
        [sys.executable, "-m", "distill.student", "--mode", "service", "--teachers", "127.0.0.1:"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 2 and "needs a host and a port" in p.stderr


@pytest.mark.timeout(960)  # a fresh machine first trains the quick teacher (~2-5 min on 2 cores)
def test_bench_quick_end_to_end(tmp_path: Path) -> None:
    """`distill bench --quick`: every row runs with real processes and the reports exist."""
    if not (DEFAULT_DATASET_DIR / "train-images-idx3-ubyte.gz").exists():
        pytest.fail("Fashion-MNIST missing: sudo apt-get install -y dataset-fashion-mnist", pytrace=False)
    out = tmp_path / "bench"
    p = subprocess.run(
        [sys.executable, "-m", "distill", "bench", "--quick", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    s = json.loads((out / "summary.json").read_text())
    assert s["quick"] is True and s["device"] == "cpu"
    rows = {(r["mode"], r["teachers"], r["row"]): r for r in s["rows"]}
    assert [r["row"] for r in s["rows"]] == [
        "pure",
        "same-net",
        "service-1",
        "service-2",
        "service-4",
        "service-2-kill",
    ]
    for r in s["rows"]:
        for key in (
            "mode",
            "teachers",
            "accuracy_mean",
            "accuracy_std",
            "samples_per_s",
            "ratio_to_pure",
            "lost_samples",
        ):
            assert key in r
        assert r["lost_samples"] == 0 and r["duplicate_samples"] == 0
        assert r["samples_per_s"] > 0 and 0.1 < r["accuracy_mean"] <= 1.0
    assert rows[("service", 4, "service-4")]["teachers"] == 4
    by = {r["row"]: r for r in s["rows"]}
    # the service student is fed the same teacher's logits as same-net: same accuracy
    assert abs(by["service-1"]["accuracy_mean"] - by["same-net"]["accuracy_mean"]) < 0.01
    kill = s["elasticity"]["runs"][0]
    assert kill["lost_samples"] == 0 and kill["measured"] and kill["retries"] >= 1
    assert s["teacher_exit_codes"] and all(c == 0 for c in s["teacher_exit_codes"].values())
    md = (out / "summary.md").read_text()
    assert "35.9%" in md and "2.31x" in md and "pinned" in md
    assert (out / "bench.png").stat().st_size > 10_000
