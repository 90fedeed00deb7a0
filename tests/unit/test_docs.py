"""The README and ``docs/`` say only what is true of this repository, checked without starting anything.

Why: a command in a README that no longer exists, a scenario it names that no longer validates, a link
to a moved page or a field reference that lags the model are what a newcomer meets first.  So:

* every command shown (fenced ``bash``/``sh``/``console`` blocks, and inline `` `make ...` `` /
  `` `hollowscale ...` `` spans) is checked: ``hollowscale <group> <cmd>`` answers ``--help`` (in-process,
  click's CliRunner), ``make <target>`` names a target of the Makefile (read, never run),
  ``python -m X`` names an importable module (one that exposes ``main(argv)`` with argparse answers
  ``--help`` in-process), ``python FILE.py`` and ``locust -f FILE`` name files that exist; a command
  of any other program must be one this page knows to be external;
* every ``scenarios/*.yaml`` named, and every scenario of the README's table, passes ``hollowscale
  validate`` (in-process), and the table lists every shipped scenario;
* every relative link (and its ``#anchor``) resolves; no page links outside the repository;
* ``docs/scenario-reference.md`` is what :mod:`hollowscale.scenario.reference` writes from the model now;
* the README stays short, and every page of ``docs/`` opens with who it is for.

All of it in-process: a unit test may start no process (``tests/sessionguard.py``).
"""

from __future__ import annotations

import importlib.util
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import click
import pytest
from click.testing import CliRunner

from hollowscale.cli import main as hollowscale_cli
from hollowscale.scenario import reference

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
#: the README's size the newcomer reads in minutes (issue 34: about 150 lines)
README_MAX_LINES = 160
#: programs a page may show that are not ours: only their existence on the user's machine is assumed
EXTERNAL = {"kubectl", "kind", "go", "git", "docker", "podman", "pip", "curl", "gh", "nvidia-smi"}
SHELL_LANGS = {"bash", "sh", "shell", "console"}


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


# ------------------------------------------------------------------------------------------- commands


@dataclass(frozen=True)
class Shown:
    """One command as a page shows it."""

    page: str
    line: int
    text: str

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}:{self.text[:60]}"


#: an inline span that is a command: ``make T``, ``hollowscale ...``, ``python -m X``, ``python FILE.py``
INLINE = re.compile(r"^(sudo )?(\.venv/bin/)?(make|hollowscale|python3?) \S")


def _strip_comment(line: str) -> str:
    return re.split(r"(?:^|\s)#(?:\s|$)", line, maxsplit=1)[0].strip()


def shown_commands(path: Path) -> list[Shown]:
    """The commands of ``path``: each line of a shell block (``$ `` lines of a console block), backslash
    continuations joined, and the inline spans that start with ``make`` or ``hollowscale``."""
    out: list[Shown] = []
    lines = path.read_text().splitlines()
    lang: str | None = None
    pending, start = "", 0
    for i, line in enumerate(lines, 1):
        fence = re.match(r"^\s*```(\S*)", line)
        if fence:
            lang = None if lang is not None else fence.group(1).lower()
            continue
        if lang is None:
            for span in re.findall(r"`([^`]+)`", line):
                if INLINE.match(span):
                    out.append(Shown(_rel(path), i, span.strip()))
            continue
        if lang not in SHELL_LANGS:
            continue
        text = line.strip()
        if lang == "console":
            if not text.startswith("$ "):
                continue
            text = text[2:]
        if not pending:
            start = i
        if text.endswith("\\"):
            pending += text[:-1] + " "
            continue
        command = _strip_comment(pending + text)
        pending = ""
        if command:
            out.append(Shown(_rel(path), start, command))
    return out


COMMANDS = [c for page in DOCS for c in shown_commands(page)]


def makefile_targets() -> set[str]:
    targets: set[str] = set()
    for line in (ROOT / "Makefile").read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9][\w.-]*(?:\s+[A-Za-z0-9][\w.-]*)*)\s*:(?!=)", line)
        if m:
            targets.update(m.group(1).split())
    return targets


def _click_path(args: list[str]) -> list[str]:
    """The command path of ``hollowscale ARGS`` (groups and the command, up to its arguments)."""
    command: click.Command = hollowscale_cli
    path: list[str] = []
    for token in args:
        if not isinstance(command, click.Group) or not re.match(r"^[a-z][a-z0-9-]*$", token):
            break  # a command's arguments, an option, or prose such as `...`
        sub = command.commands.get(token)
        assert sub is not None, f"`hollowscale {' '.join(path)}` has no command {token!r}"
        path.append(token)
        command = sub
    return path


def _command_at(path: list[str]) -> click.Command:
    command: click.Command = hollowscale_cli
    for token in path:
        assert isinstance(command, click.Group)
        command = command.commands[token]
    return command


def _has_main(source: Path) -> bool:
    """``source`` exposes ``main(argv)`` over argparse: its ``--help`` can be asked in-process."""
    text = source.read_text() if source.suffix == ".py" and source.is_file() else ""
    return "ArgumentParser" in text and "def main(argv" in text


def _help_in_process(module: ModuleType, shown: str) -> None:
    with pytest.raises(SystemExit) as done:
        module.main(["--help"])
    assert done.value.code == 0, f"{shown} --help exited {done.value.code}"


def _module_help(module: str) -> None:
    """``python -m module``: importable; one with ``main(argv)`` over argparse answers ``--help``."""
    try:
        spec = importlib.util.find_spec(module)
    except ModuleNotFoundError:
        spec = None
    assert spec is not None, f"no module {module}"
    if _has_main(Path(spec.origin or "")):
        _help_in_process(importlib.import_module(module), f"python -m {module}")


def _file_help(script: str) -> None:
    """``python FILE.py``: the file exists; one with ``main(argv)`` over argparse answers ``--help``."""
    path = ROOT / script
    assert path.is_file(), f"no file {script}"
    if _has_main(path):
        spec = importlib.util.spec_from_file_location(f"shown_{path.stem}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # dataclasses and typing look a module up by name
        try:
            spec.loader.exec_module(module)
            _help_in_process(module, f"python {script}")
        finally:
            del sys.modules[spec.name]


def check_command(text: str, targets: set[str]) -> str:
    """Check one shown command; what kind it was."""
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise AssertionError(f"not a shell command: {exc}") from None
    while words and (re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]) or words[0] in ("sudo", "time")):
        words = words[1:]
    assert words, "an empty command"
    program, args = words[0], words[1:]
    name = program.rsplit("/", 1)[-1]
    if name == "make":
        named = [a for a in args if "=" not in a and not a.startswith("-")]
        assert named, "make without a target: name it"
        missing = [t for t in named if t not in targets]
        assert not missing, f"no Makefile target {missing}"
        return "make"
    if name in ("python", "python3"):
        if args[:2] == ["-m", "hollowscale"]:
            name, args = "hollowscale", args[2:]
        elif args[:1] == ["-m"]:
            _module_help(args[1])
            return "python -m"
        else:
            _file_help(next(a for a in args if not a.startswith("-")))
            return "python file"
    if name == "hollowscale":
        path = _click_path(args)
        command = _command_at(path)
        if not isinstance(command, click.Group):  # the options shown are the command's (``[--a|--b]`` too)
            known = {o for p in command.params for o in (*p.opts, *p.secondary_opts)} | {"--help", "-h"}
            shown = {part.split("=")[0] for token in args[len(path):] for part in token.strip("[]").split("|")
                     if part.startswith("--")}
            assert shown <= known, f"`hollowscale {' '.join(path)}` has no option {sorted(shown - known)}"
        result = CliRunner().invoke(hollowscale_cli, [*path, "--help"])
        assert result.exit_code == 0, f"hollowscale {' '.join(path)} --help: exit {result.exit_code}\n{result.output}"
        return "hollowscale"
    if name == "locust":
        file = args[args.index("-f") + 1]
        assert (ROOT / file).is_file(), f"no file {file}"
        return "locust"
    assert name in EXTERNAL, f"{name!r}: neither ours nor a program this test knows as external ({sorted(EXTERNAL)})"
    return "external"


@pytest.mark.parametrize("shown", COMMANDS, ids=[c.id for c in COMMANDS])
def test_every_command_shown_exists(shown: Shown) -> None:
    try:
        check_command(shown.text, makefile_targets())
    except AssertionError as exc:
        raise AssertionError(f"{shown.page}:{shown.line}: `{shown.text}`: {exc}") from None


def test_the_command_check_can_fail() -> None:
    """The checks above refuse what does not exist (a test that cannot fail proves nothing)."""
    targets = makefile_targets()
    assert {"scale-test", "test", "setup-test", "bench-dra"} <= targets
    for bad in ("make no-such-target", "hollowscale cluster nonsense", "hollowscale nonsense run",
                "hollowscale cluster up --no-such-flag", "hollowscale plan X [--resume|--no-such]",
                "python -m hollowscale.no_such_module", ".venv/bin/python tests/bench/no_such.py", "hollowscle run x"):
        with pytest.raises(AssertionError):
            check_command(bad, targets)
    assert check_command("sudo .venv/bin/hollowscale cluster up --real-nodes 2", targets) == "hollowscale"
    assert check_command("NIGHTLY_UPDATE_BASELINE=1 make nightly", targets) == "make"


def test_the_pages_show_the_commands_a_newcomer_needs() -> None:
    readme = {c.text for c in shown_commands(ROOT / "README.md")}
    assert {"make scale-test", "make test", "make scale-test SCENARIO=scenarios/gang-contention.yaml"} <= readme
    kinds = {check_command(c.text, makefile_targets()) for c in COMMANDS}
    assert {"make", "hollowscale", "python -m", "python file"} <= kinds, kinds


# ------------------------------------------------------------------------------------------- scenarios


#: a scenario file named on a page (``scenarios/X.yaml``, upper case, is a placeholder, as ``SCENARIO`` is)
SCENARIO_NAME = re.compile(r"\bscenarios/[a-z0-9][\w.-]*\.yaml\b")


def named_scenarios() -> tuple[set[str], set[str]]:
    """The shipped scenarios named anywhere (and the README table's `<name>.yaml` rows), and the names of
    files a command shown writes (``--out scenarios/mine.yaml``: the user's, not the repository's)."""
    found: set[str] = {f"scenarios/{n}" for n in readme_table_scenarios()}
    written: set[str] = set()
    for page in DOCS:
        text = page.read_text()
        found.update(SCENARIO_NAME.findall(text))
        written.update(re.findall(r"--out (scenarios/[\w.-]+\.yaml)", text))
    return {n for n in found if not (n in written and not (ROOT / n).exists())}, written


def readme_table_scenarios() -> list[str]:
    text = (ROOT / "README.md").read_text()
    return re.findall(r"^\| `([\w.-]+\.yaml)` \|", text, re.M)


def test_every_scenario_named_validates() -> None:
    shipped, _written = named_scenarios()
    names = sorted(shipped)
    missing = [n for n in names if not (ROOT / n).is_file()]
    assert not missing, f"named but not in the repository: {missing}"
    result = CliRunner().invoke(hollowscale_cli, ["validate", *(str(ROOT / n) for n in names)])
    assert result.exit_code == 0, result.output
    for n in names:
        assert f"{ROOT / n}: ok" in result.output, f"{n} was not validated:\n{result.output}"


def test_the_readme_table_lists_every_shipped_scenario_once() -> None:
    rows = readme_table_scenarios()
    shipped = sorted(p.name for p in (ROOT / "scenarios").glob("*.yaml"))
    assert sorted(rows) == shipped, "the README's scenario table and scenarios/*.yaml differ"
    assert len(rows) == len(set(rows))


# ------------------------------------------------------------------------------------------- links


def _slug(heading: str) -> str:
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = path.read_text()
    found = set(re.findall(r'<a id="([^"]+)"></a>', text))
    seen: dict[str, int] = {}
    in_code = False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            in_code = not in_code
        m = re.match(r"^#{1,6}\s+(.*)$", line)
        if m and not in_code:
            slug = _slug(m.group(1))
            n = seen.get(slug, 0)
            found.add(slug if n == 0 else f"{slug}-{n}")
            seen[slug] = n + 1
    return found


def links(path: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    return re.findall(r"\]\(([^)\s]+)\)", text)


@pytest.mark.parametrize("page", DOCS, ids=[_rel(p) for p in DOCS])
def test_every_link_resolves(page: Path) -> None:
    bad = []
    for target in links(page):
        if re.match(r"^[a-z]+:", target):
            bad.append(f"{target} (outside the repository)")
            continue
        file, _, anchor = target.partition("#")
        dest = (page.parent / file).resolve() if file else page
        if not dest.exists():
            bad.append(f"{target} (no such file)")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            bad.append(f"{target} (no heading or anchor #{anchor} in {_rel(dest)})")
        elif not dest.is_relative_to(ROOT):
            bad.append(f"{target} (outside the repository)")
    assert not bad, f"{_rel(page)}: " + "; ".join(bad)


def test_the_link_check_can_fail(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n## A heading\n\nsee [x](page.md#a-heading), [y](page.md#nothing), [z](gone.md)\n")
    assert "a-heading" in anchors(page)
    assert links(page) == ["page.md#a-heading", "page.md#nothing", "gone.md"]


# ------------------------------------------------------------------------------------------- pages


def test_scenario_reference_is_current() -> None:
    committed = reference.REFERENCE_PATH.read_text() if reference.REFERENCE_PATH.exists() else ""
    assert committed == reference.render(), (
        f"docs/scenario-reference.md differs from the scenario model: run `{reference.REGENERATE}` and commit it")


def test_scenario_reference_covers_every_field() -> None:
    """Each model the scenario file composes has its section, and each of its fields a row."""
    text = reference.render()
    for s in [*reference.sections(reference.ScenarioFile, ""), *reference.sections(reference.TraceScenarioFile, "trace")]:
        assert f'<a id="{s.anchor}"></a>' in text
        assert [r.name for r in s.rows] == [(f.alias or n) for n, f in s.model.model_fields.items()]
    assert "| `settle_timeout_s` | duration | `120` |" in text  # a default, a type word, from the model itself
    assert "| `backend` | one of `local`, `kind`, `existing` | `local` |" in text


def test_readme_is_short_and_answers_the_newcomer() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= README_MAX_LINES, "the README is for the newcomer: move detail to docs/"
    assert "make scale-test SCENARIO=scenarios/gang-contention.yaml" in readme  # how to run it
    assert "reports/latest/" in readme and "comparison.md" in readme  # where its report is
    assert "5,000 nodes" in readme and "reports/bench/dra.md" in readme  # what the DRA bench found there
    assert "docs/img/" in readme and (ROOT / "docs" / "img").is_dir()


@pytest.mark.parametrize("page", [p for p in DOCS if p.parent.name == "docs"], ids=lambda p: p.name)
def test_each_page_says_who_it_is_for(page: Path) -> None:
    paragraphs = [p.strip() for p in page.read_text().split("\n\n") if p.strip()]
    assert paragraphs[0].startswith("# ") and paragraphs[1].startswith("For "), \
        f"{_rel(page)}: open with one line saying who the page is for ('For whoever ...')"
