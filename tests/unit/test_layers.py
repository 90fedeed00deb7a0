"""The package graph is a DAG: orchestrator -> engines -> ground floor; inside the orchestrator
(``hollowscale``), its sub-packages keep the floors of :data:`HOLLOWSCALE_FLOORS` and no files import
each other.

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


# ------------------------------------------------------------------------------------ inside hollowscale
#: hollowscale's floors, bottom first.  A sub-package (or top-level module) of hollowscale imports only
#: what is on a floor below its own: never up, never sideways (rooms on one floor never reach into each
#: other).  docs/architecture.md draws the same picture.
HOLLOWSCALE_FLOORS: tuple[frozenset[str], ...] = (
    # leaves: the version, where files are, pinned versions, how a moment is written; the fake GPU
    # device plugin (a process of its own on real nodes)
    frozenset({"__init__", "paths", "versions", "timestamps", "deviceplugin"}),
    # OCI images written by our own code; workload traces (format, readers); the DRA kubelet plugin (a process
    # of its own on real nodes, built on the device plugin's inventory and stubs); the Go toolchain that builds
    # (found or fetched; stdlib only: setup runs it before the venv exists)
    frozenset({"images", "trace", "draplugin", "gotoolchain"}),
    frozenset({"cluster"}),  # the local control plane, kind's CLI, real nodes, each component's command line
    # what a run does (composes the engines' specs); a kind node image built here, and the engine it runs in
    frozenset({"scenario", "kindnode"}),
    frozenset({"measure", "setupneeds"}),  # timeline, PromQL, recovery, integrity; what a scenario needs here
    frozenset({"report"}),  # summary.md, report.html, junit, verdicts, regressions, baselines
    # the run's parts: the cluster it uses, where its agents run, its features (rooms, side by side)
    frozenset({"backends", "placements", "distilljobs", "batch", "dra", "replay", "topology", "training"}),
    frozenset({"run"}),  # the orchestrator: phases, summary.json, variants, its CLI
    frozenset({"plan", "nightly"}),  # many runs
    frozenset({"cli"}),
    frozenset({"__main__"}),
)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def hollowscale_imports() -> dict[str, set[str]]:
    """Every module of hollowscale -> the modules of hollowscale it imports (every statement, lazy ones
    too; ``from package import name`` counts as importing the submodule when ``name`` is one)."""
    paths = {_module_name(p): p for p in sorted((ROOT / "hollowscale").rglob("*.py"))}

    def resolve(name: str) -> str | None:
        while name and name not in paths:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for module, path in paths.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join([*anchor, *([node.module] if node.module else [])])
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in paths else base for a in node.names]
            for target in targets:
                resolved = resolve(target) if target.startswith("hollowscale") else None
                if resolved and resolved != module:
                    found.add(resolved)
        graph[module] = found
    return graph


def _unit(module: str) -> str:
    """The sub-package or top-level module of hollowscale that ``module`` belongs to."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _floor(unit: str) -> int:
    return next(i for i, floor in enumerate(HOLLOWSCALE_FLOORS) if unit in floor)


def test_every_part_of_hollowscale_is_on_a_floor() -> None:
    units = {_unit(m) for m in hollowscale_imports()}
    declared = set().union(*HOLLOWSCALE_FLOORS)
    assert units - declared == set(), "put the new sub-package on a floor of HOLLOWSCALE_FLOORS"
    assert declared - units == set(), "a floor names a part of hollowscale that is gone"
    assert sum(len(f) for f in HOLLOWSCALE_FLOORS) == len(declared), "a part is on two floors"


def test_hollowscale_imports_only_lower_floors() -> None:
    breaches = sorted(f"{m} -> {t}" for m, targets in hollowscale_imports().items() for t in targets
                      if _unit(m) != _unit(t) and _floor(_unit(t)) >= _floor(_unit(m)))
    assert not breaches, f"an import that goes up or sideways between hollowscale's floors: {breaches}"


def test_no_two_files_of_hollowscale_import_each_other() -> None:
    """No import cycle between the files of hollowscale, of any length."""
    graph = hollowscale_imports()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def strong(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    assert not cycles, f"files of hollowscale that import each other: {cycles}"


def test_the_floor_rules_see_real_imports() -> None:
    """Not vacuous: the scan finds the edges the design is made of."""
    graph = hollowscale_imports()
    units = {(_unit(m), _unit(t)) for m, targets in graph.items() for t in targets}
    for edge in (("run", "backends"), ("run", "placements"), ("run", "distilljobs"), ("batch", "measure"),
                 ("cluster", "images"), ("report", "scenario"), ("cli", "run")):
        assert edge in units, edge
    assert "hollowscale.cluster.components.apiserver" in graph["hollowscale.cluster.local"]
    assert "hollowscale.report.sections" in graph["hollowscale.report.markdown"]
