"""Which folder is a local cluster's, and what in it ``down`` may remove.

A cluster folder is one that ``up`` made: before anything else it writes :data:`MARKER` into it, saying
that hollowscale made the folder and whether ``up`` created it or found it empty.  ``down`` removes from
a marked folder only the entries a cluster puts there (:data:`OWN_ENTRIES`), the marker last, and the
folder itself only when ``up`` created it.  Anything else found inside (a file someone put there) is left
and reported, and so is a mount point still under an entry of ours (removing through a mount would delete
what another filesystem holds).  A folder without the marker is never touched: one typo (``--dir .``)
must not cost a user their work.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from hollowscale.cluster.installed import INSTALLABLE
from hollowscale.cluster.supervisor import SUPERVISOR_DIR

#: written first by ``up`` into the folder it makes a cluster folder
MARKER = ".hollowscale-cluster"
#: what a cluster puts in its folder: ``up``'s files, the components' data and logs, the installed controllers'
#: folders (Kueue, JobSet: :data:`~hollowscale.cluster.installed.INSTALLABLE`), the real nodes' folder, the
#: supervisor's bookkeeping (``down`` removes these and nothing else)
OWN_ENTRIES = frozenset({
    "state.json", "state.tmp", "pki", "logs", "etcd", "kubeconfig", "controller-manager.kubeconfig",
    "scheduler.kubeconfig", "scheduler-config.yaml", "audit-policy.yaml", "real", SUPERVISOR_DIR, *INSTALLABLE,
})


class ForeignDirError(RuntimeError):
    """The folder holds something that is not a hollowscale cluster; the message says what to do."""


@dataclass
class Removal:
    """What :func:`remove_cluster_dir` did.

    Attributes:
        removed_dir: the folder itself is gone (``up`` had created it and nothing foreign was left).
        left: foreign entries, mount points and entries that could not be removed, each left in place.
    """

    removed_dir: bool = False
    left: list[str] = field(default_factory=list)


def is_cluster_dir(folder: Path) -> bool:
    """True when ``folder`` carries the marker ``up`` writes (hollowscale made it a cluster folder)."""
    return _read_marker(folder) is not None


def _read_marker(folder: Path) -> dict[str, object] | None:
    try:
        doc = json.loads((folder / MARKER).read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) and doc.get("made_by") == "hollowscale" else None


def check_usable(folder: Path) -> None:
    """Refuse a folder ``up`` must not use: a file, or a folder that holds anything and has no marker.

    Raises:
        ForeignDirError: with what was found and what to do.
    """
    if (not folder.exists() and not folder.is_symlink()) or is_cluster_dir(folder):
        return
    if not folder.is_dir():
        raise ForeignDirError(f"{folder} is not a folder; give `--dir` (cluster.dir) a folder that does not "
                              "exist yet or is empty")
    entries = sorted(p.name for p in folder.iterdir())
    if "state.json" in entries:
        raise ForeignDirError(
            f"{folder} holds a cluster of an older hollowscale (state.json but no {MARKER}): stop it with "
            f"`hollowscale cluster down --dir {folder}`, which leaves its files, remove the folder yourself, "
            "and start again")
    if entries:
        shown = ", ".join(entries[:3]) + (f" and {len(entries) - 3} more" if len(entries) > 3 else "")
        raise ForeignDirError(
            f"{folder} is not empty ({shown}) and is not a hollowscale cluster folder (no {MARKER}); nothing "
            "was started and nothing in it was changed: give `--dir` (cluster.dir) a folder that does not exist "
            "yet or is empty")


def claim_cluster_dir(folder: Path) -> None:
    """Make ``folder`` a cluster folder: create it, or take it when it is empty, and mark it.

    A folder that is already marked is kept as it is (its marker still says whether ``up`` created it).

    Raises:
        ForeignDirError: ``folder`` is a file, or a folder that holds anything and has no marker.
    """
    check_usable(folder)
    if is_cluster_dir(folder):
        return
    created = False
    try:
        folder.mkdir(parents=True)
        created = True
    except FileExistsError:
        check_usable(folder)  # made meanwhile by someone else: only an empty one will do
    doc = {"made_by": "hollowscale", "what": "local cluster", "created_folder": created,
           "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    tmp = folder / f"{MARKER}.tmp"
    tmp.write_text(json.dumps(doc, indent=2) + "\n")
    tmp.replace(folder / MARKER)


def remove_cluster_dir(folder: Path, mounts: set[str] | None = None) -> Removal:
    """Remove what a cluster put in ``folder``; leave and report anything else (see the module docstring).

    Args:
        folder: a folder marked by :func:`claim_cluster_dir` (an unmarked one is left whole).
        mounts: mount points to stay out of (default: this process's, from ``/proc/self/mountinfo``).
    """
    out = Removal()
    marker = _read_marker(folder)
    if marker is None:
        out.left.append(f"{folder} (not a hollowscale cluster folder: no {MARKER})")
        return out
    points = mount_points() if mounts is None else mounts
    for entry in sorted(folder.iterdir()):
        if entry.name in OWN_ENTRIES:
            _remove_tree(entry, points, out.left)
        elif entry.name not in (MARKER, f"{MARKER}.tmp"):
            out.left.append(f"{entry} (not made by hollowscale)")
    if out.left:  # the marker stays with what is left, so a later `down` still knows the folder
        return out
    (folder / MARKER).unlink(missing_ok=True)
    (folder / f"{MARKER}.tmp").unlink(missing_ok=True)
    if marker.get("created_folder") is True:
        with contextlib.suppress(OSError):
            folder.rmdir()
            out.removed_dir = True
    return out


def _remove_tree(path: Path, mounts: set[str], left: list[str]) -> None:
    """Remove ``path`` and what is below it, never crossing into a mount point (those are listed in ``left``)."""
    if str(path) in mounts:
        left.append(f"{path} (a mount point: unmount it, then remove it)")
        return
    if path.is_symlink() or not path.is_dir():
        try:
            path.unlink(missing_ok=True)
        except OSError as exc:
            left.append(f"{path} ({exc.strerror})")
        return
    before = len(left)
    try:
        children = list(path.iterdir())
    except OSError as exc:
        left.append(f"{path} ({exc.strerror})")
        return
    for child in children:
        _remove_tree(child, mounts, left)
    try:
        path.rmdir()
    except OSError as exc:
        if len(left) == before and exc.errno != errno.ENOENT:  # else what is left inside says why
            left.append(f"{path} ({exc.strerror})")


def mount_points() -> set[str]:
    """Every mount point of this mount namespace (``/proc/self/mountinfo``; empty where it is unreadable)."""
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return set()
    return {os.path.normpath(_unescape(line.split()[4])) for line in lines if len(line.split()) > 4}


def _unescape(text: str) -> str:
    """mountinfo writes space, tab, newline and backslash as octal escapes (``\\040``)."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), text)
