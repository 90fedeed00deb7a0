"""What is written once stays written once: the repository root, the cache root, the report's number
formatter, the timer loop of the hollow managers; and no two modules of an engine import each other.

Read from the source (every statement, also inside functions), so a copy cannot hide in a lazy corner.
"""

from __future__ import annotations

import ast
import asyncio
from pathlib import Path

import pytest

from hollow.clock import FakeClock
from hollow.leases import LeaseManager
from hollow.nodes import NodeManager
from hollow.pods import PodController
from hollow.timers import TimedTasks
from hollowscale import paths
from hollowscale.report.numbers import number, percent

#: this checkout, found from here (tests may: they are not part of the package)
ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "hollowscale"
ENGINES = ("kubecore", "hollow", "loadgen", "distill")


def _modules(folder: Path) -> dict[str, ast.Module]:
    return {str(p.relative_to(ROOT)): ast.parse(p.read_text(), filename=str(p)) for p in sorted(folder.rglob("*.py"))}


def _uses_file(tree: ast.AST) -> bool:
    """``__file__`` read in any form (``Path(__file__)``, ``package.__file__``)."""
    return any((isinstance(n, ast.Name) and n.id == "__file__") or (isinstance(n, ast.Attribute) and n.attr == "__file__")
               for n in ast.walk(tree))


def test_the_repository_root_is_computed_only_in_paths() -> None:
    found = {name for name, tree in _modules(PACKAGE).items() if _uses_file(tree)}
    assert "hollowscale/paths.py" in found  # the rule sees the one place that may
    others = sorted(found - {"hollowscale/paths.py"})
    assert not others, f"{others}: take the repository root from hollowscale.paths.REPO_ROOT, not from __file__"
    assert paths.REPO_ROOT == ROOT and (paths.REPO_ROOT / "hollowscale" / "paths.py").is_file()


def test_the_cache_root_is_defined_only_in_paths(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name, tree in _modules(PACKAGE).items():
        if name == "hollowscale/paths.py":
            continue
        defs = [n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
        env = [n.value for n in ast.walk(tree)
               if isinstance(n, ast.Constant) and n.value in ("HOLLOWSCALE_CACHE", "XDG_CACHE_HOME")]
        assert "cache_root" not in defs and not env, f"{name}: take the cache root from hollowscale.paths.cache_root"
    monkeypatch.setenv("HOLLOWSCALE_CACHE", str(tmp_path / "c"))
    assert paths.cache_root() == tmp_path / "c"
    monkeypatch.delenv("HOLLOWSCALE_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert paths.cache_root() == tmp_path / "xdg" / "hollowscale"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert paths.cache_root() == Path.home() / ".cache" / "hollowscale"


def _formats_numbers(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """The formatter's shape: ``n/a`` for a missing figure and a grouped format spec (``:,.2f``)."""
    missing = any(isinstance(n, ast.Constant) and n.value == "n/a" for n in ast.walk(fn))
    grouped = any(isinstance(n, ast.FormattedValue) and n.format_spec is not None
                  and "," in ast.unparse(n.format_spec) for n in ast.walk(fn))
    return missing and grouped


def test_the_number_formatter_is_written_once() -> None:
    found = {name for name, tree in _modules(PACKAGE).items()
             for fn in ast.walk(tree) if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef) and _formats_numbers(fn)}
    others = sorted(found - {"hollowscale/report/numbers.py"})
    assert not others, f"{others}: format report figures with hollowscale.report.numbers.number"
    # the shape is recognised where it is written (the rule is not vacuous)
    sample = ast.parse('def _f(v):\n    return "n/a" if v is None else f"{v:,.3f}".rstrip("0")\n').body[0]
    assert isinstance(sample, ast.FunctionDef) and _formats_numbers(sample)


@pytest.mark.parametrize(("args", "kwargs", "text"), [
    ((None,), {}, "n/a"),
    ((1234.56,), {}, "1,234.6"),
    ((1234.5, 2), {}, "1,234.50"),
    ((0.25, 0), {}, "0"),
    ((1234567,), {}, "1,234,567"),
    ((1234567,), {"group_ints": False}, "1234567"),
    ((True,), {}, "1"),
    ((True,), {"group_ints": False}, "True"),
    (("Ready",), {}, "Ready"),
    ((1234.500, 3), {"trim": True}, "1,234.5"),
    ((100.0, 3), {"trim": True}, "100"),
    ((0.0004, 3), {"trim": True}, "0"),
    ((-2.0, 3), {"trim": True}, "-2"),
    ((1500, 3), {"trim": True}, "1,500"),
])
def test_number_writes_figures_as_the_reports_did(args: tuple[object, ...], kwargs: dict[str, bool], text: str) -> None:
    assert number(*args, **kwargs) == text  # type: ignore[arg-type]


def test_percent() -> None:
    assert [percent(None), percent(float("inf")), percent(4.24), percent(-0.05)] == ["n/a", "+inf", "+4.2%", "-0.1%"]


def test_the_hollow_managers_share_one_timer_loop() -> None:
    for cls in (LeaseManager, PodController, NodeManager):
        assert issubclass(cls, TimedTasks), cls
        assert "run" not in vars(cls) and "_spawn" not in vars(cls), f"{cls.__name__}: TimedTasks runs the timers"
    assert "stop" not in vars(LeaseManager) and "stop" not in vars(PodController)


def test_timed_tasks_stop_cancels_the_work_in_flight() -> None:
    class Sleepers(TimedTasks[str]):
        def __init__(self) -> None:
            super().__init__(FakeClock())
            self.cancelled: list[str] = []

        def _fire(self, key: str, due: float) -> None:
            self._spawn(self._sleep(key))

        async def _sleep(self, key: str) -> None:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                self.cancelled.append(key)
                raise

    async def scenario() -> tuple[int, int, list[str]]:
        s = Sleepers()
        for key in ("a", "b"):
            s._timers.schedule(key, 0.0)
        s._timers.run_due()
        await asyncio.sleep(0)
        before = s.backlog()
        await s.stop()
        await asyncio.sleep(0)  # the done callbacks forget the tasks
        return before, s.backlog(), sorted(s.cancelled)

    assert asyncio.run(scenario()) == (2, 0, ["a", "b"])


@pytest.mark.parametrize("package", ENGINES)
def test_no_two_modules_of_an_engine_import_each_other(package: str) -> None:
    imports: dict[str, set[str]] = {}
    for name, tree in _modules(ROOT / package).items():
        module = name.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
        found: set[str] = set()
        for n in ast.walk(tree):
            if isinstance(n, ast.ImportFrom) and n.module and n.level == 0:
                found |= {n.module, *(f"{n.module}.{a.name}" for a in n.names)}
            elif isinstance(n, ast.Import):
                found |= {a.name for a in n.names}
        imports[module] = found
    loops = sorted((a, b) for a, deps in imports.items() for b in deps if a < b and b in imports and a in imports[b])
    assert not loops, f"modules importing each other: {loops}"
