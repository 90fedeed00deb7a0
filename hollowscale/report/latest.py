"""``reports/latest``: the newest run of a reports folder, pointed at, never someone else's file replaced."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

#: in a copy :func:`update_latest` made of a run folder (where links fail): that ``latest`` is ours to replace
LATEST_COPY_MARKER = ".hollowscale-latest-copy"


def update_latest(reports_root: Path, run_dir: Path, warn: Callable[[str], None] | None = None) -> Path | None:
    """Point ``<reports_root>/latest`` at ``run_dir`` (a relative symlink; a copy where links fail).

    Only a ``latest`` of ours is replaced (:func:`latest_is_ours`): a file, a folder or a link elsewhere
    that someone else made under that name is left as it is, ``warn`` is told why (default: one line on
    stderr) and None is returned; the run's own folder is not affected either way.
    """
    latest = reports_root / "latest"
    if not latest_is_ours(latest, reports_root):
        what = "a folder" if latest.is_dir() and not latest.is_symlink() else \
            "a link outside the reports folder" if latest.is_symlink() else "a file"
        (warn or _warn)(f"{latest} is {what} hollowscale did not make: left as it is, not pointed at {run_dir}")
        return None
    tmp = reports_root / ".latest.tmp"
    try:
        if tmp.is_symlink() or tmp.exists():
            tmp.unlink()  # our own temp link (an interrupted earlier update)
        os.symlink(os.path.relpath(run_dir, reports_root), tmp)
        os.replace(tmp, latest)
    except OSError:
        import shutil

        if latest.is_symlink():
            latest.unlink()
        elif latest.exists():
            shutil.rmtree(latest)  # a copy of ours (latest_is_ours checked its marker)
        shutil.copytree(run_dir, latest)
        (latest / LATEST_COPY_MARKER).write_text(f"a copy of {run_dir} made by hollowscale (links failed here)\n")
    return latest


def latest_is_ours(latest: Path, reports_root: Path) -> bool:
    """Whether ``latest`` may be replaced: absent, a relative link that stays inside ``reports_root`` (what
    :func:`update_latest` writes), or a copy it made (holding :data:`LATEST_COPY_MARKER`)."""
    if latest.is_symlink():
        target = os.readlink(latest)
        rel = os.path.normpath(target)
        return not os.path.isabs(target) and rel not in (".", "..") and not rel.startswith(".." + os.sep)
    if not latest.exists():
        return True
    return latest.is_dir() and (latest / LATEST_COPY_MARKER).is_file()


def _warn(message: str) -> None:
    import sys

    print(f"warning: {message}", file=sys.stderr, flush=True)
