"""The package graph is a DAG: orchestrator -> engines -> ground floor.

Every import statement of every module is read (also imports inside functions, which are still
dependencies), so a layering breach cannot hide in a lazy import.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
OURS = ("kubecore", "hollow", "loadgen", "distill", "hollowscale")
#: what each package may import of ours (besides itself)
ALLOWED: dict[str, set[str]] = {
    "kubecore": set(),
    "hollow": {"kubecore"},
    "loadgen": {"kubecore"},
    "distill": {"kubecore"},
    "hollowscale": {"kubecore", "hollow", "loadgen", "distill"},
}


def imported_packages(package: str) -> dict[str, set[str]]:
    """Our top-level packages imported by ``package``, each with the files that import it."""
    found: dict[str, set[str]] = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            elif isinstance(node, ast.ImportFrom) and node.level > 0:
                names = [package]
            for name in names:
                top = name.split(".")[0]
                if top in OURS and top != package:
                    found.setdefault(top, set()).add(str(path.relative_to(ROOT)))
    return found


@pytest.mark.parametrize("package", OURS)
def test_package_imports_only_lower_floors(package: str) -> None:
    breaches = {dep: files for dep, files in imported_packages(package).items() if dep not in ALLOWED[package]}
    assert not breaches, f"{package} may import only {sorted(ALLOWED[package]) or 'nothing of ours'}: {breaches}"


def test_graph_has_no_cycle() -> None:
    graph = {p: set(imported_packages(p)) for p in OURS}
    state: dict[str, int] = {}

    def visit(node: str, trail: list[str]) -> None:
        if state.get(node) == 1:
            raise AssertionError(f"import cycle: {' -> '.join([*trail, node])}")
        if state.get(node) == 2:
            return
        state[node] = 1
        for nxt in sorted(graph[node]):
            visit(nxt, [*trail, node])
        state[node] = 2

    for p in OURS:
        visit(p, [])


def test_rule_is_not_vacuous() -> None:
    """The scan sees real imports: the orchestrator does use every engine and the ground floor."""
    assert set(imported_packages("hollowscale")) == {"kubecore", "hollow", "loadgen", "distill"}
    for engine in ("hollow", "loadgen", "distill"):
        assert "kubecore" in imported_packages(engine), engine


def test_kubecore_imports_nothing_heavy() -> None:
    """The ground floor stays light: no torch, no locust, no aiohttp at any import."""
    heavy = {"torch", "locust", "aiohttp", "gevent"}
    for path in (ROOT / "kubecore").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import | ast.ImportFrom):
                mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                assert not {m.split(".")[0] for m in mods} & heavy, (path, mods)
