"""Every third-party package our code imports is declared where its users get it.

Every import statement of every module is read with ``ast`` (imports inside functions too: a lazy
import is still a dependency), import names are mapped to the distributions that provide them in
this environment (``importlib.metadata.packages_distributions``), and each must be declared in
``pyproject.toml``: the core dependencies for ``kubecore``, ``hollow``, ``loadgen`` and
``hollowscale`` (what ``make scale-test`` installs), core or the ``distill`` extra for ``distill``,
and core, ``distill`` or ``dev`` for the tests.  PyTorch stays out of the core: no core module
imports it, and the whole ``hollowscale`` command line but ``distill``'s commands runs without it.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import subprocess
import sys
import textwrap
import tomllib
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
OURS = ("kubecore", "hollow", "loadgen", "distill", "hollowscale")
CORE_PACKAGES = ("kubecore", "hollow", "loadgen", "hollowscale")
#: the import names of the tests' own helper modules (``tests/*.py``, on sys.path in the suite)
# modules of the test tree itself (shared helpers at its top, a unit test reusing another's helpers,
# the bench scripts' machine facts)
TEST_LOCAL = {"tests", "conftest"} | {p.stem for p in (ROOT / "tests").rglob("*.py")}


def _normalise(dist: str) -> str:
    """PEP 503 name: ``PyYAML`` -> ``pyyaml``, ``pydantic_core`` -> ``pydantic-core``."""
    return re.sub(r"[-_.]+", "-", dist).lower()


def _requirement_name(requirement: str) -> str:
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    assert match, f"unreadable requirement {requirement!r} in pyproject.toml"
    return _normalise(match.group(1))


@cache
def declared() -> dict[str, set[str]]:
    """``core`` and each extra -> the distribution names pyproject.toml declares there."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    out = {"core": {_requirement_name(r) for r in project["dependencies"]}}
    for extra, reqs in project.get("optional-dependencies", {}).items():
        out[extra] = {_requirement_name(r) for r in reqs}
    return out


def imported_modules(folder: str, local: set[str] = set()) -> dict[str, set[str]]:  # noqa: B006 (read only)
    """Third-party modules imported anywhere under ``folder`` (absolute imports, any depth in the
    file), each with the files importing it; stdlib, our packages and ``local`` left out."""
    found: dict[str, set[str]] = {}
    for path in sorted((ROOT / folder).rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top in sys.stdlib_module_names or top in OURS or top in local:
                    continue
                found.setdefault(name, set()).add(str(path.relative_to(ROOT)))
    return found


def module_level_imports(path: Path) -> set[str]:
    """Modules a file imports when it is imported (not inside functions or classes' methods)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    pending: list[ast.stmt] = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
        elif isinstance(node, ast.If | ast.Try | ast.With | ast.ClassDef):
            # the bodies of these run at import (TYPE_CHECKING blocks included: harmless but kept)
            for field in ("body", "orelse", "finalbody", "handlers"):
                for child in getattr(node, field, []):
                    pending.extend(child.body if isinstance(child, ast.ExceptHandler) else [child])
    return names


@cache
def _packages_distributions() -> dict[str, list[str]]:
    return dict(importlib.metadata.packages_distributions())


def distributions_of(module: str) -> set[str]:
    """Distributions providing ``module`` here; for a namespace package shared by several (``google``),
    those that ship the module's own folder or file (``google.protobuf`` -> ``protobuf``)."""
    top = module.split(".")[0]
    candidates = _packages_distributions().get(top, [])
    if len(set(candidates)) > 1 and "." in module:
        prefix = module.replace(".", "/")
        narrowed = {
            d
            for d in candidates
            if any(str(f).startswith((prefix + "/", prefix + ".")) for f in importlib.metadata.files(d) or ())
        }
        if narrowed:
            return {_normalise(d) for d in narrowed}
    return {_normalise(d) for d in candidates}


def undeclared(folder: str, allowed: set[str], local: set[str] = set()) -> dict[str, str]:  # noqa: B006
    """Import name -> why it is not covered by ``allowed`` distributions."""
    problems: dict[str, str] = {}
    for module, files in imported_modules(folder, local).items():
        dists = distributions_of(module)
        where = ", ".join(sorted(files))
        if not dists:
            problems[module] = f"provided by no installed distribution (imported in {where})"
        elif not dists & allowed:
            problems[module] = f"from {sorted(dists)}, not declared for {folder} (imported in {where})"
    return problems


@pytest.mark.parametrize("package", CORE_PACKAGES)
def test_core_package_imports_are_core_dependencies(package: str) -> None:
    problems = undeclared(package, declared()["core"])
    assert not problems, f"add to [project] dependencies: {problems}"


def test_distill_imports_are_core_or_distill_extra() -> None:
    problems = undeclared("distill", declared()["core"] | declared()["distill"])
    assert not problems, f"add to [project.optional-dependencies] distill: {problems}"


def test_test_imports_are_declared_for_make_test() -> None:
    """`make test` installs the extras dev and distill; the tests import nothing else."""
    allowed = declared()["core"] | declared()["distill"] | declared()["dev"]
    problems = undeclared("tests", allowed, local=TEST_LOCAL)
    assert not problems, f"add to [project.optional-dependencies] dev: {problems}"


def test_the_scan_sees_real_imports() -> None:
    """Not vacuous: known imports are found and mapped to the distributions declared for them."""
    core = imported_modules("kubecore")
    assert "yaml" in core and "pydantic" in core and "requests" in core
    assert distributions_of("yaml") == {"pyyaml"}
    assert "torch" in imported_modules("distill") and "torch" in declared()["distill"]
    assert "pytest" in imported_modules("tests", TEST_LOCAL)
    assert {"hypothesis", "pytest", "types-requests"} <= declared()["dev"]


def test_torch_is_not_a_core_dependency() -> None:
    assert "torch" not in declared()["core"]
    assert {"torch", "numpy"} <= declared()["distill"]


@pytest.mark.parametrize("package", CORE_PACKAGES)
def test_core_packages_do_not_import_torch_at_module_level(package: str) -> None:
    offenders = [
        str(path.relative_to(ROOT))
        for path in sorted((ROOT / package).rglob("*.py"))
        if any(name.split(".")[0] == "torch" for name in module_level_imports(path))
    ]
    assert not offenders, f"{package} imports torch at module level in {offenders}"


def test_packaging_ships_kubecore_and_the_hollow_yaml() -> None:
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert "kubecore*" in setuptools["packages"]["find"]["include"]
    assert "*.yaml" in setuptools["package-data"]["hollow"]


_PROBE = textwrap.dedent(
    """
    import sys
    from click.testing import CliRunner
    from hollowscale.cli import main

    runner = CliRunner()
    invocations = [["--help"]]
    for name, command in main.commands.items():
        invocations.append([name, "--help"])
        for sub in getattr(command, "commands", {}):
            invocations.append([name, sub, "--help"])
    for args in invocations:
        result = runner.invoke(main, args)
        assert result.exit_code == 0, (args, result.output, result.exception)
    print(len(invocations), "torch" in sys.modules, ",".join(sorted(main.commands)))
    """
)


@pytest.mark.integration  # starts a process
def test_every_command_help_runs_without_loading_torch() -> None:
    """`hollowscale --help` and every command's help, in a fresh interpreter: torch never loads."""
    out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    count, torch_loaded, commands = out.stdout.split()
    assert int(count) > 5 and {"distill", "run", "cluster"} <= set(commands.split(",")), out.stdout
    assert torch_loaded == "False", "the core command line imported torch"


@pytest.mark.integration  # starts a process
def test_distill_command_without_torch_says_what_to_install() -> None:
    """Torch made unimportable the way Python documents it (``sys.modules[name] = None``):
    `hollowscale distill bench` exits 2 with one line naming the extra."""
    probe = (
        "import sys; sys.modules['torch'] = None; sys.argv = ['hollowscale', 'distill', 'bench', '--quick'];"
        "from hollowscale.cli import main; main()"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 2, (out.stdout, out.stderr)
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "pip install 'hollowscale[distill]'" in lines[0], out.stderr
    assert "torch" in lines[0] and "Traceback" not in out.stderr
