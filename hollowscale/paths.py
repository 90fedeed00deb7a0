"""Where hollowscale's files are: the repository checkout it runs from and the cache outside it.

Every module that needs either asks here, so the answer is computed once:

- :data:`REPO_ROOT`: the checkout holding the project's packages (``hollowscale``, ``hollow``,
  ``distill`` ... side by side) and its data (``scenarios/``, ``deploy/``, ``reports/``);
- :func:`cache_root`: the root of the caches kept outside the repo (built binaries, images, tools),
  read at each call so a test or a user can point ``$HOLLOWSCALE_CACHE`` elsewhere;
- :func:`fresh_dir`: a new folder of ours under a parent, never one that exists (two runs started in the
  same second each get their own report folder instead of writing into one).
"""

from __future__ import annotations

import os
from pathlib import Path

#: the repository checkout (the folder holding the ``hollowscale`` package)
REPO_ROOT = Path(__file__).resolve().parents[1]


def cache_root() -> Path:
    """Root of hollowscale's caches (``$HOLLOWSCALE_CACHE`` or ``~/.cache/hollowscale``)."""
    env = os.environ.get("HOLLOWSCALE_CACHE")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "hollowscale"


def fresh_dir(parent: Path, name: str) -> Path:
    """Create and return ``parent/name``, or ``parent/name-2``, ``-3`` ... when that exists: a folder this
    call made (``mkdir`` without ``exist_ok`` is the claim, so two processes never get the same one)."""
    parent.mkdir(parents=True, exist_ok=True)
    for i in range(1, 1000):
        candidate = parent / (name if i == 1 else f"{name}-{i}")
        try:
            candidate.mkdir()
        except FileExistsError:
            continue
        return candidate
    raise FileExistsError(f"{parent / name} and 998 numbered folders beside it exist already")
