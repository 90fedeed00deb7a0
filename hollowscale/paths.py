"""Where hollowscale's files are: the repository checkout it runs from and the cache outside it.

Every module that needs either asks here, so the answer is computed once:

- :data:`REPO_ROOT`: the checkout holding the project's packages (``hollowscale``, ``hollow``,
  ``distill`` ... side by side) and its data (``scenarios/``, ``deploy/``, ``reports/``);
- :func:`cache_root`: the root of the caches kept outside the repo (built binaries, images, tools),
  read at each call so a test or a user can point ``$HOLLOWSCALE_CACHE`` elsewhere;
- :func:`fresh_dir`: a new folder of ours under a parent, never one that exists (two runs started in the
  same second each get their own report folder instead of writing into one);
- :func:`short_temp_dir`: a new folder of ours straight in ``/tmp`` (short, for unix sockets), recorded in
  the ledger a test session names (:data:`TEMP_LEDGER_VAR`), so the suite knows exactly what it made there.
"""

from __future__ import annotations

import os
import tempfile
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


#: a file the test suite names (tests/tmpguard.py): every folder :func:`short_temp_dir` makes, and every path
#: :func:`record_temp` is given, is appended to it, one per line, by whichever process of the session makes it
TEMP_LEDGER_VAR = "HOLLOWSCALE_TEMP_LEDGER"
#: the machine's temp folder itself, for what must have a short path whatever ``$TMPDIR`` says
SHORT_TEMP_ROOT = Path("/tmp")


def record_temp(path: Path) -> None:
    """Note ``path`` (made straight in ``/tmp``, outside ``$TMPDIR``) in the test session's ledger, when one is
    named: the suite then checks that exactly this path is gone at its end, instead of guessing by name
    which of ``/tmp``'s entries are ours (another run on the machine makes folders of the same names)."""
    ledger = os.environ.get(TEMP_LEDGER_VAR)
    if ledger:
        with open(ledger, "a", encoding="utf-8") as fh:  # one short append per line: whole lines under O_APPEND
            fh.write(f"{path}\n")


def short_temp_dir(prefix: str) -> Path:
    """A new folder of ours directly in ``/tmp`` (``prefix`` + random), recorded by :func:`record_temp`.

    Why ``/tmp`` and not ``$TMPDIR``: unix socket paths are limited to 107 bytes, and a cluster's or a
    plugin's sockets lie a few folders below; ``$TMPDIR`` may be long (the test session points it at a
    folder of its own). The caller removes it."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=SHORT_TEMP_ROOT))
    record_temp(path)
    return path
