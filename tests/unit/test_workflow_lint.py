"""``.github/workflows/nightly.yml`` passes actionlint, and a broken copy of it does not.

actionlint comes from the Go module proxy (``go install github.com/rhysd/actionlint/cmd/actionlint@VERSION``,
the version pinned below is what ``go list -m -versions github.com/rhysd/actionlint`` served on 2026-12-01),
built once into ``<hollowscale cache>/bin-tools/actionlint-VERSION/`` and reused.  The Go toolchain is already a
requirement of the project (the control plane is built with it), so this adds no dependency; the broken copies
show the lint would catch a real mistake, not only that it runs.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

import pytest
import yaml

from hollowscale.cluster.binaries import go_binary
from hollowscale.paths import cache_root

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / ".github" / "workflows" / "nightly.yml"
ACTIONLINT_VERSION = "v1.7.12"


@pytest.fixture(scope="module")
def actionlint() -> Path:
    dest = cache_root() / "bin-tools" / f"actionlint-{ACTIONLINT_VERSION}"
    exe = dest / "actionlint"
    if not exe.is_file():
        dest.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ, GOBIN=str(dest), GOFLAGS="-mod=mod", CGO_ENABLED="0")
        env.setdefault("GOTOOLCHAIN", "auto")
        r = subprocess.run([go_binary(), "install", f"github.com/rhysd/actionlint/cmd/actionlint@{ACTIONLINT_VERSION}"],
                           env=env, cwd=tempfile.gettempdir(), capture_output=True, text=True, timeout=600)
        assert r.returncode == 0 and exe.is_file(), f"go install actionlint failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return exe


def lint(exe: Path, workflow: Path) -> subprocess.CompletedProcess[str]:
    # -shellcheck= / -pyflakes=: lint the workflow itself; the scripts it runs are ours and checked elsewhere
    return subprocess.run([str(exe), "-no-color", "-shellcheck=", "-pyflakes=", str(workflow)],
                          capture_output=True, text=True, timeout=120)


@pytest.mark.integration  # starts a process
def test_nightly_workflow_passes_actionlint(actionlint: Path) -> None:
    r = lint(actionlint, WORKFLOW)
    assert r.returncode == 0, r.stdout + r.stderr


def test_workflow_has_what_nightly_ci_needs() -> None:
    doc = yaml.safe_load(WORKFLOW.read_text())
    on = doc.get("on", doc.get(True))  # YAML 1.1 reads a bare `on:` key as True
    assert "schedule" in on and "workflow_dispatch" in on
    text = WORKFLOW.read_text()
    for needle in ("actions/cache@", "hashFiles('hollowscale/versions.py')", "~/.cache/hollowscale/bin",
                   "make nightly", "actions/upload-artifact@", "gh run download", "GITHUB_STEP_SUMMARY"):
        assert needle in text, needle


def _broken(tmp_path: Path, name: str, old: str, new: str) -> Path:
    text = WORKFLOW.read_text()
    assert old in text, f"the workflow no longer has {old!r}: update this test"
    path = tmp_path / name
    path.write_text(text.replace(old, new, 1))
    return path


@pytest.mark.integration  # starts a process
def test_unknown_key_fails_actionlint(actionlint: Path, tmp_path: Path) -> None:
    bad = _broken(tmp_path, "unknown-key.yml", "    runs-on: ubuntu-24.04\n",
                  "    runs-on: ubuntu-24.04\n    run-on-failure: retry\n")
    r = lint(actionlint, bad)
    assert r.returncode != 0
    assert "run-on-failure" in r.stdout, r.stdout


@pytest.mark.integration  # starts a process
def test_unknown_step_id_fails_actionlint(actionlint: Path, tmp_path: Path) -> None:
    bad = _broken(tmp_path, "bad-expression.yml", "steps.baseline.outputs.found", "steps.baselin.outputs.found")
    r = lint(actionlint, bad)
    assert r.returncode != 0 and "baselin" in r.stdout, r.stdout
