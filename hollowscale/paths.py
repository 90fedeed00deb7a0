"""Where hollowscale's files are: the repository checkout it runs from and the cache outside it.

Every module that needs either asks here, so the answer is computed once:

- :data:`REPO_ROOT`: the checkout holding the project's packages (``hollowscale``, ``hollow``,
  ``distill`` ... side by side) and its data (``scenarios/``, ``deploy/``, ``reports/``);
- :func:`cache_root`: the root of the caches kept outside the repo (built binaries, images, tools),
  read at each call so a test or a user can point ``$HOLLOWSCALE_CACHE`` elsewhere.
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
