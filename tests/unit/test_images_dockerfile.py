"""distill/Dockerfile: parsed and checked against what hollowscale's own distill image holds.

No Docker engine runs here, so the file is checked instruction by instruction: known instructions,
FROM first, exec-form ENTRYPOINT/CMD equal to the image hollowscale writes, COPY sources that exist
and are exactly the project packages distill imports, a pip line covering every third-party
distribution distill imports, and a .dockerignore that lets in just those packages.
"""

from __future__ import annotations

import importlib.metadata as md
import json
import re
import shlex

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from hollowscale.images.distill_image import distill_recipe
from hollowscale.images.pyenv import project_closure
from hollowscale.paths import REPO_ROOT

ROOT = REPO_ROOT
INSTRUCTIONS = {"FROM", "RUN", "CMD", "LABEL", "EXPOSE", "ENV", "ADD", "COPY", "ENTRYPOINT", "VOLUME", "USER",
                "WORKDIR", "ARG", "ONBUILD", "STOPSIGNAL", "HEALTHCHECK", "SHELL"}


def parse_dockerfile(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs: comments dropped, backslash continuations joined."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if pending and line.startswith("#"):
            continue  # comment lines inside a continued instruction are dropped by Docker too
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        full = (pending + line).strip()
        pending = ""
        keyword, _, args = full.partition(" ")
        out.append((keyword.upper(), args.strip()))
    assert not pending, "the Dockerfile ends inside a continued line"
    return out


@pytest.fixture(scope="module")
def instructions() -> list[tuple[str, str]]:
    return parse_dockerfile((ROOT / "distill" / "Dockerfile").read_text())


def test_header_says_it_is_not_built_here() -> None:
    text = (ROOT / "distill" / "Dockerfile").read_text()
    assert text.startswith("# syntax=docker/dockerfile:1")
    assert "NOT BUILT ON THIS PROJECT'S MACHINES" in text and "no Docker engine" in text


def test_instructions_are_known_and_from_comes_first(instructions: list[tuple[str, str]]) -> None:
    unknown = [k for k, _ in instructions if k not in INSTRUCTIONS]
    assert not unknown, unknown
    keywords = [k for k, _ in instructions]
    first = next(k for k in keywords if k != "ARG")
    assert first == "FROM" and keywords.count("FROM") == 1
    assert re.fullmatch(r"python:\$\{PYTHON_VERSION\}-slim-bookworm", dict(instructions)["FROM"])


def test_runtime_config_matches_the_image_hollowscale_writes(instructions: list[tuple[str, str]]) -> None:
    config = distill_recipe(gpu=False).config
    found = dict(instructions)
    assert json.loads(found["ENTRYPOINT"]) == config["Entrypoint"]
    assert json.loads(found["CMD"]) == config["Cmd"]
    assert found["WORKDIR"] == config["WorkingDir"]
    env = dict(item.split("=", 1) for item in shlex.split(found["ENV"]))
    ours = dict(item.split("=", 1) for item in config["Env"])
    for key in ("PYTHONPATH", "PYTHONUNBUFFERED", "LANG"):
        assert env[key] == ours[key], key


def test_copies_exactly_the_project_packages_distill_imports(instructions: list[tuple[str, str]]) -> None:
    needed = {p.parts[0] for p in project_closure(ROOT, "distill").files}
    copied = {}
    for keyword, args in instructions:
        if keyword == "COPY":
            src, dest = args.split()
            assert (ROOT / src).is_dir(), f"COPY source {src} does not exist in the build context"
            copied[src.strip("/")] = dest
    assert set(copied) == needed
    assert all(dest == f"/app/{src}/" for src, dest in copied.items())
    ignore = (ROOT / ".dockerignore").read_text().split()
    assert "*" in ignore and {f"!{p}/" for p in needed} <= set(ignore)


def test_installs_every_distribution_distill_imports(instructions: list[tuple[str, str]]) -> None:
    runs = " ".join(args for keyword, args in instructions if keyword == "RUN")
    specs = [s.strip('"') for s in re.findall(r'"[A-Za-z][\w.-]*[<>=!~][^"]*"', runs)]
    installed = {canonicalize_name(Requirement(s).name) for s in specs} | {"torch"}  # torch via $TORCH_SPEC
    assert "$TORCH_SPEC" in runs and "download.pytorch.org/whl/cpu" in runs
    providers = md.packages_distributions()
    for name in project_closure(ROOT, "distill").external:
        dists = {canonicalize_name(d) for d in providers.get(name, [])}
        assert dists & installed, f"distill imports {name} (distribution {dists}) but the Dockerfile does not install it"


def test_dataset_and_busybox_come_from_debian(instructions: list[tuple[str, str]]) -> None:
    runs = " ".join(args for keyword, args in instructions if keyword == "RUN")
    assert "dataset-fashion-mnist" in runs and "busybox-static" in runs


def test_parser_joins_continuations_and_drops_comments() -> None:
    parsed = parse_dockerfile("# c\nFROM x\nRUN a \\\n  # inner\n  && b\n")
    assert parsed == [("FROM", "x"), ("RUN", "a  && b")]
