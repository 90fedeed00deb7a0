"""The paths in a committed benchmark file say where things were without this machine's folders in them.

A bench writes its run folders, profiles, cluster folders, binaries and command lines into
``reports/bench/*.json|md``, which are committed: an absolute path there (``/work/main/...``,
``/root/.cache/...``, ``/tmp/p13/run3``) points outside the repository and names one machine's layout.
:func:`portable` rewrites every string of a report before it is written:

* a path inside the repository: relative to it (``.hollowscale/bench-hollow/cluster-r1-hollow``);
* a path in the home folder: ``~/...`` (``~/.cache/hollowscale/bin/v1.36.3/kube-apiserver``);
* a path in the temp folder: relative to it, i.e. the run folder's name and what is below it
  (``p13/run3``);
* any other path under a machine folder (:data:`MACHINE_ROOTS`): its last component.

Only paths whose first component is one of :data:`MACHINE_ROOTS` are touched: an API path
(``/api/v1/nodes``, ``/metrics``), a URL (``https://...``) or a kernel interface named as a source of
figures (``/proc/stat``) is the same on every machine and stays.  ``tests/unit/test_bench_reports.py``
checks the committed files by the same rule.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
#: first components of absolute paths that name one machine's folders (not /proc, /sys, /dev: kernel
#: interfaces, the same everywhere)
MACHINE_ROOTS = ("work", "root", "home", "tmp", "var", "usr", "opt", "run", "etc", "mnt", "srv", "media", "snap",
                 "nix", "boot", "bin", "sbin", "lib", "lib64", "Users", "private", "Volumes")
#: an absolute path below a machine folder that starts a token (after a space, a quote, '=', '(' ...; not
#: inside a URL or a relative path), up to the next space, quote, comma, semicolon or closing bracket; a
#: machine folder alone ("nothing left in /tmp") is a word, not a machine's layout
_PATH = re.compile(r"(?<![\w.~:/-])/(?:" + "|".join(MACHINE_ROOTS) + r")/[^\s\"'`,;)\]]+")


def _under(path: str, root: str) -> str | None:
    root = root.rstrip("/")
    if path == root:
        return ""
    return path[len(root) + 1:] if path.startswith(root + "/") else None


def portable_path(path: str) -> str:
    """One absolute machine path as the module docstring says."""
    for root, shown in ((str(REPO), "{}"), (str(Path.home()), "~/{}"), (tempfile.gettempdir(), "{}"), ("/tmp", "{}")):
        for form in (root, os.path.realpath(root)):
            rest = _under(path, form)
            if rest is not None:
                return shown.format(rest) if rest else ("." if shown == "{}" else "~")
    return path.rstrip("/").rsplit("/", 1)[-1] or path


def _known_roots() -> list[str]:
    """The repository, home and temp folders as they are on this machine, whatever their first component."""
    roots: set[str] = set()
    for root in (str(REPO), str(Path.home()), tempfile.gettempdir(), "/tmp"):
        roots.update(form.rstrip("/") for form in (root, os.path.realpath(root)) if form.rstrip("/"))
    return sorted(roots, key=len, reverse=True)


def _known_path() -> re.Pattern[str]:
    """An absolute path in one of :func:`_known_roots` that starts a token: the checkout may live anywhere
    (``/check/work/main``, ``/builds/x``), not only below a folder of :data:`MACHINE_ROOTS`."""
    alternatives = "|".join(re.escape(root) for root in _known_roots())
    return re.compile(r"(?<![\w.~:/-])(?:" + alternatives + r")(?=$|[/\s\"'`,;)\]])[^\s\"'`,;)\]]*")


def portable_text(text: str) -> str:
    """``text`` with every machine path in it rewritten (:func:`portable_path`)."""
    text = _known_path().sub(lambda m: portable_path(m.group(0)), text)
    return _PATH.sub(lambda m: portable_path(m.group(0)), text)


def portable(doc: Any) -> Any:
    """A copy of ``doc`` (JSON values) with every string, keys included, passed through :func:`portable_text`."""
    if isinstance(doc, str):
        return portable_text(doc)
    if isinstance(doc, dict):
        return {portable(k) if isinstance(k, str) else k: portable(v) for k, v in doc.items()}
    if isinstance(doc, (list, tuple)):
        return [portable(v) for v in doc]
    if isinstance(doc, Path):
        return portable_text(str(doc))
    return doc
