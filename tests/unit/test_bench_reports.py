"""No committed benchmark file holds a machine's path, and the benches write none (tests/bench/portable.py).

The rule: an absolute POSIX path whose first component is a folder of a machine's own layout (the
repository's checkout ``/work/...``, home folders ``/root``, ``/home``, ``/Users``, temp folders ``/tmp``,
``/var``, system folders ``/usr``, ``/opt``, ``/etc``, ``/run``, ``/mnt``, ``/srv`` ...) with at least one
component below it, starting a token (after a space, a quote, ``=``, ``(``, a backtick...) or after
``file://``.  Not matched: URLs (``https://host/tmp/x``: the path follows a host name), API paths
(``/api/v1/nodes``, ``/metrics``), relative paths (``reports/bench/x``, ``.hollowscale/...``, ``~/...``),
a folder named alone in prose ("nothing left in /tmp"), and the kernel's interfaces (``/proc/stat``,
``/sys/...``, ``/dev/...``), which are the same on every Linux machine and name where a figure comes from.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from types import ModuleType

import pytest

from distill.bench import shown_path

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "reports" / "bench"
_ROOTS = ("work", "root", "home", "Users", "tmp", "var", "usr", "opt", "etc", "run", "mnt", "srv", "media", "private",
          "Volumes", "snap", "nix", "boot", "bin", "sbin", "lib", "lib64")
MACHINE_PATH = re.compile(r"(?:(?<=file://)|(?<![\w.~:/-]))/(?:" + "|".join(_ROOTS) + r")/[^\s\"'`,;)\]]+")


def _portable() -> ModuleType:
    spec = importlib.util.spec_from_file_location("portable_under_test", ROOT / "tests" / "bench" / "portable.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def machine_paths(text: str) -> list[str]:
    return MACHINE_PATH.findall(text)


def test_the_rule_finds_machine_paths_and_nothing_else() -> None:
    found = machine_paths('"run_dir": "/work/main/.hollowscale/bench-batch/q-1", --kubeconfig=/root/.kube/config '
                          "`--out /tmp/p13/run3` (see /home/u/x.json) file:///var/lib/x [/opt/y]")
    assert found == ["/work/main/.hollowscale/bench-batch/q-1", "/root/.kube/config", "/tmp/p13/run3",
                     "/home/u/x.json", "/var/lib/x", "/opt/y"]
    assert machine_paths("https://example.org/tmp/x, /api/v1/nodes, /metrics, /proc/stat, /sys/fs/cgroup, /dev/null, "
                         ".hollowscale/bench/x, ~/.cache/hollowscale/bin, reports/bench/tmp/x, nothing in /tmp.") == []


@pytest.mark.parametrize("path", sorted(p for p in BENCH.rglob("*") if p.is_file() and p.suffix in (".json", ".md")),
                         ids=lambda p: p.name)
def test_no_committed_bench_file_holds_a_machine_path(path: Path) -> None:
    found = machine_paths(path.read_text())
    assert found == [], f"{path.relative_to(ROOT)} names this machine's folders: {sorted(set(found))[:5]}"


def test_every_committed_bench_file_is_checked() -> None:
    files = [p for p in BENCH.rglob("*") if p.is_file()]
    assert files and all(p.suffix in (".json", ".md") for p in files), [p.name for p in files]


def test_portable_rewrites_paths_relative_to_the_repo_home_or_temp_folder() -> None:
    portable = _portable()
    home = Path.home()
    doc = {"run_dir": str(ROOT / ".hollowscale" / "bench-batch" / "q-1"),
           "flags": [f"--kubeconfig={ROOT}/.hollowscale/c/scheduler.kubeconfig", f"{home}/.cache/hollowscale/bin/etcd"],
           "command": "python tests/bench/bench_hollow.py --out /tmp/p13/run3",
           "binary": "/usr/bin/prometheus", "api": "/api/v1/nodes and https://example.org/tmp/x and /proc/stat",
           "figures": {"pods_per_s": 12.5, "n": 3, "ok": True, "none": None}, f"{ROOT}/key": 1}
    shown = portable.portable(doc)
    assert shown == {"run_dir": ".hollowscale/bench-batch/q-1",
                     "flags": ["--kubeconfig=.hollowscale/c/scheduler.kubeconfig", "~/.cache/hollowscale/bin/etcd"],
                     "command": "python tests/bench/bench_hollow.py --out p13/run3",
                     "binary": "prometheus", "api": "/api/v1/nodes and https://example.org/tmp/x and /proc/stat",
                     "figures": {"pods_per_s": 12.5, "n": 3, "ok": True, "none": None}, "key": 1}
    assert machine_paths(json.dumps(shown)) == []


def test_the_distill_bench_shows_its_checkpoint_without_the_machines_folders(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    assert shown_path(Path.home() / ".cache" / "hollowscale" / "distill" / "teacher.pt") == \
        "~/.cache/hollowscale/distill/teacher.pt"
    assert shown_path(ROOT / "reports" / "distill-bench") == "reports/distill-bench"
    assert shown_path(Path("reports/distill-bench")) == "reports/distill-bench"
    assert shown_path(Path("/tmp/dt/full2")) == "full2"


def test_the_benches_write_through_portable() -> None:
    """Each bench that writes a committed file with paths in it passes its document through portable."""
    for name in ("bench_batch", "bench_trace", "bench_hollow", "bench_dra", "compare_runs", "bench_scaling",
                 "bench_plan", "ab_manifests", "beside"):
        source = (ROOT / "tests" / "bench" / f"{name}.py").read_text()
        assert "from portable import portable" in source and "portable(" in source, name
