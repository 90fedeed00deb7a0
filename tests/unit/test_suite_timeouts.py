"""Every wait a test sets for itself ends before pytest's timeout for that test does.

pytest-timeout interrupts a test that overruns; a test whose own subprocess or wait outlasts it is cut
off mid-wait instead of failing with its own message, and a command it started may be killed before its
teardown (see tests/clirun.py). So each literal ``timeout=``/``timeout_s=`` (and ``wait_until``'s third
argument) in a test, and in the module's helpers and fixtures that any of its tests may call, stays
below the smallest pytest timeout among the module's tests; for ``run_cli`` the teardown it allows
after an interrupt counts too. Read from the source (AST): nothing is run.
"""

from __future__ import annotations

import ast
import tomllib
from dataclasses import dataclass
from pathlib import Path

import clirun
import pytest

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent
DEFAULT_TIMEOUT = float(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["timeout"])
TIMEOUT_KWARGS = {"timeout", "timeout_s"}


@dataclass(frozen=True)
class Wait:
    line: int
    seconds: float  # with the teardown run_cli allows after an interrupt
    what: str


def _number(node: ast.AST) -> float | None:
    return float(node.value) if isinstance(node, ast.Constant) and isinstance(node.value, int | float) else None


def _call_name(call: ast.Call) -> str:
    f = call.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def _timeout_marker(decorators: list[ast.expr]) -> float | None:
    """N of a ``pytest.mark.timeout(N)`` among ``decorators`` (or in a pytestmark list)."""
    for dec in decorators:
        for node in ast.walk(dec):
            if isinstance(node, ast.Call) and _call_name(node) == "timeout" and node.args:
                value = _number(node.args[0])
                if value is not None:
                    return value
    return None


def waits(tree: ast.AST) -> list[Wait]:
    """Every literal timeout a call under ``tree`` sets, with what the test runner must leave it."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = _call_name(node)
        extra = clirun.TEARDOWN_S if name == "run_cli" else 0.0
        for kw in node.keywords:
            value = _number(kw.value) if kw.arg in TIMEOUT_KWARGS else None
            if value is not None:
                shown = f"{name}({kw.arg}={value:g})" + (f" + {extra:g} s teardown" if extra else "")
                found.append(Wait(node.lineno, value + extra, shown))
        if name == "wait_until" and len(node.args) >= 3 and (value := _number(node.args[2])) is not None:
            found.append(Wait(node.lineno, value, f"wait_until(..., {value:g})"))
    return found


def module_limits(path: Path) -> list[str]:
    """The waits in ``path`` that reach past the pytest timeout they run under (one line each)."""
    tree = ast.parse(path.read_text(), str(path))
    module_timeout = DEFAULT_TIMEOUT
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in stmt.targets):
            module_timeout = _timeout_marker([stmt.value]) or module_timeout
    funcs = [s for s in tree.body if isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef)]
    tests = {f.name: _timeout_marker(f.decorator_list) or module_timeout for f in funcs if f.name.startswith("test_")}
    if not tests:
        return []
    helpers_limit = min(tests.values())  # a helper or fixture may run under any of the module's tests
    problems = []
    for func in funcs:
        limit = tests.get(func.name, helpers_limit)
        for wait in waits(func):
            if wait.seconds >= limit:
                shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name
                problems.append(f"{shown}:{wait.line}: {wait.what} in {func.name} "
                                f"is not below its pytest timeout {limit:g} s")
    return problems


MODULES = sorted((TESTS / "unit").glob("test_*.py")) + sorted((TESTS / "integration").glob("test_*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_waits_end_before_the_test_timeout(path: Path) -> None:
    assert module_limits(path) == []


def test_the_check_sees_a_wait_past_the_timeout(tmp_path: Path) -> None:
    bad = tmp_path / "test_bad.py"
    bad.write_text("import pytest, subprocess\n\n@pytest.mark.timeout(100)\ndef test_x():\n"
                   "    subprocess.run(['x'], timeout=100)\n    run_cli(['y'], timeout_s=20)\n"
                   "    wait_until('z', f, 50)\n\ndef test_y():\n    pass\n\ndef helper():\n"
                   "    wait_until('z', f, 950)\n")
    assert [w.what for w in waits(ast.parse(bad.read_text()))] == [
        "run(timeout=100)", f"run_cli(timeout_s=20) + {clirun.TEARDOWN_S:g} s teardown", "wait_until(..., 50)",
        "wait_until(..., 950)"]
    problems = module_limits(bad)
    # 100 is not below 100; 20 + the teardown is; 950 in a helper is past the module's smallest (100)
    assert len(problems) == 3 and "timeout=100" in problems[0] and "run_cli" in problems[1], problems
    assert "helper" in problems[2] and "below its pytest timeout 100 s" in problems[2]
