"""What goes into the distill image: project closure, distributions, shared libraries, pycs."""

from __future__ import annotations

import importlib.util
import os
import py_compile
import struct
import sys
from pathlib import Path

import pytest

from hollowscale.images.distill_image import (
    IMAGE_LIBDIR,
    IMAGE_SITE,
    DistillPlan,
    distill_recipe,
    rewrite_pycs,
    unchecked_pyc,
    with_pycs,
)
from hollowscale.images.layout import file_entry
from hollowscale.images.pyenv import distributions_for, project_closure
from hollowscale.paths import REPO_ROOT

ROOT = REPO_ROOT


def _compile(source: Path) -> Path:
    """A timestamp pyc of ``source`` (what pip and the interpreter write)."""
    out = py_compile.compile(str(source), invalidation_mode=py_compile.PycInvalidationMode.TIMESTAMP, doraise=True)
    assert out is not None
    return Path(out)


def test_project_closure_follows_imports_through_the_project_only() -> None:
    closure = project_closure(ROOT, "distill")
    files = {str(p) for p in closure.files}
    assert {"distill/student.py", "distill/teacher.py", "kubecore/procs.py", "kubecore/promtext.py",
            "kubecore/__init__.py"} <= files
    assert not any(f.startswith(("hollowscale/", "hollow/", "loadgen/")) for f in files), files
    assert {"torch", "numpy", "aiohttp", "orjson", "prometheus_client"} <= set(closure.external)
    assert not set(closure.external) & set(sys.stdlib_module_names)


def test_project_closure_resolves_relative_imports(tmp_path: Path) -> None:
    pkg = tmp_path / "app"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "main.py").write_text("from .helper import x\nfrom . import sub\n")
    (pkg / "helper.py").write_text("import other.mod\nx = 1\n")
    (pkg / "sub" / "__init__.py").write_text("from ..helper import x\ndef f():\n    import yaml\n")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "__init__.py").write_text("")
    (tmp_path / "other" / "mod.py").write_text("import requests\n")
    (tmp_path / "other" / "unused.py").write_text("import never_imported\n")
    closure = project_closure(tmp_path, "app")
    assert {str(p) for p in closure.files} == {"app/__init__.py", "app/main.py", "app/helper.py",
                                              "app/sub/__init__.py", "other/__init__.py", "other/mod.py"}
    assert closure.external == ("requests", "yaml")


def test_distributions_follow_requirements_with_markers() -> None:
    site = Path(importlib.util.find_spec("torch").origin).parent.parent  # type: ignore[arg-type, union-attr]
    dists = distributions_for(["torch"], site)
    assert "torch" in dists and "filelock" in dists
    assert any(name.startswith("nvidia-") for name in dists), "torch on Linux x86_64 requires the CUDA wheels"
    assert not ({"pytest", "mypy", "ruff"} & set(dists))


def test_unchecked_pyc_keeps_the_code_and_drops_stale_ones(tmp_path: Path) -> None:
    source = tmp_path / "mod.py"
    source.write_text("VALUE = 42\n")
    pyc = _compile(source)
    data, st = source.read_bytes(), source.stat()
    rewritten = unchecked_pyc(pyc.read_bytes(), data, st)
    assert rewritten is not None
    assert struct.unpack("<I", rewritten[4:8])[0] == 0b01  # hash-based, not checked
    assert rewritten[8:16] == importlib.util.source_hash(data)
    assert rewritten[16:] == pyc.read_bytes()[16:]
    os.utime(source, (1, 1))  # the tar's mtime is 0: an unchecked pyc must still be used
    pyc.write_bytes(rewritten)
    spec = importlib.util.spec_from_file_location("mod_under_test", source)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.VALUE == 42
    stale = os.stat_result((st.st_mode, 0, 0, 0, 0, 0, st.st_size + 1, 0, int(st.st_mtime), 0))
    fresh = _compile(source)
    assert unchecked_pyc(fresh.read_bytes(), data, stale) is None


def test_pyc_entries_are_planned_and_rewritten(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text("A = 1\n")
    _compile(source)
    planned = with_pycs([file_entry("x/m.py", source, 0o644)])
    assert [e.path for e in planned] == ["x/m.py", f"x/__pycache__/m.{sys.implementation.cache_tag}.pyc"]
    out = rewrite_pycs(planned, tmp_path)
    assert out[1].data is not None and out[1].data[4:8] == struct.pack("<I", 1)
    source.write_text("A = 22\n")  # now stale: the pyc is dropped, the source stays
    assert [e.path for e in rewrite_pycs(with_pycs([file_entry("x/m.py", source, 0o644)]), tmp_path)] == ["x/m.py"]


@pytest.fixture(scope="module")
def cpu_plan(tmp_path_factory: pytest.TempPathFactory) -> DistillPlan:
    plan = DistillPlan(gpu=False, ldd_cache=tmp_path_factory.mktemp("ldd") / "ldd.json")
    plan.compute()
    return plan


def test_cpu_plan_keeps_what_torch_links_and_leaves_out_dlopen_only_cuda_and_triton(cpu_plan: DistillPlan) -> None:
    rel = {str(p.relative_to(cpu_plan.site)) for p in cpu_plan.site_files}
    assert "torch/lib/libtorch_cpu.so" in rel and "torch/lib/libtorch_python.so" in rel
    assert "nvidia/cu13/lib/libcudart.so.13" in rel  # libtorch_cpu.so links it
    assert not any(r.startswith("triton/") for r in rel)
    assert not any("libcudnn_engines" in r for r in rel), "cuDNN's engines are only dlopen-ed on a GPU"
    assert cpu_plan.missing_libs == () or set(cpu_plan.missing_libs) <= {"libcuda.so.1"}
    names = {p.name for p in cpu_plan.system_libs}
    assert {"libc.so.6", "libstdc++.so.6", "ld-linux-x86-64.so.2"} <= names


def test_runtime_layer_places_the_interpreter_and_loader(cpu_plan: DistillPlan) -> None:
    entries = {e.path: e for e in cpu_plan.runtime_entries()}
    assert entries["usr/local/bin/python"].target.startswith("python3.")
    assert entries["lib64"].kind == "symlink" and entries["lib64"].target == "usr/lib64"
    assert entries["usr/lib64/ld-linux-x86-64.so.2"].kind == "symlink"
    assert entries["usr/lib/x86_64-linux-gnu/libc.so.6"].kind == "file"
    assert any(p.startswith(f"{IMAGE_LIBDIR}/libpython") for p in entries), "libpython goes to the default lib dir"
    assert not any("/test/" in p or "tkinter" in p for p in entries)
    site = {e.path for e in cpu_plan.site_entries()}
    assert f"{IMAGE_SITE}/torch/__init__.py" in site


def test_recipe_layers_and_config() -> None:
    cpu, gpu = distill_recipe(gpu=False), distill_recipe(gpu=True)
    assert (cpu.name, gpu.name) == ("distill-cpu", "distill-gpu") and cpu.image == gpu.image
    assert len(gpu.layers) == len(cpu.layers) + 1
    assert cpu.config["Entrypoint"] == ["python", "-m", "distill"]
    assert "PYTHONPATH=/app" in cpu.config["Env"]
    assert cpu.labels["hollowscale.variant"] == "cpu" and gpu.labels["hollowscale.variant"] == "gpu"
