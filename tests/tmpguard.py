"""The suite leaves nothing of ours in the temp folder, least of all keys.

Wired into ``conftest.py`` beside :mod:`sessionguard` (the controller's session only: under pytest-xdist
the workers' sessions end first, and the controller's ends last):

* **The session's own temp folder.** At its start the session makes a folder of its own in the machine's
  temp folder (``hs-pytest-XXXXXXXX``, :data:`SESSION_PREFIX`) and makes it the temp folder of every
  process of the session: ``$TMPDIR`` (inherited by the xdist workers and by every program a test
  starts: agents, Locust, Chromium, Go, pip) and ``tempfile.tempdir`` (this process).  Whatever is still
  in it at the end, besides pytest's own ``pytest-of-<user>`` (the tests' ``tmp_path``) and the guard's
  own ``kube-cache`` (kubectl's discovery cache, ``$KUBECACHEDIR``, which would otherwise grow a folder
  per test cluster in ``~/.kube/cache``), was written by this session and not removed: it is named, the
  session fails, and the folder is removed (the exact path it made, never through a mount point).
* **What the session made straight in ``/tmp``.** Folders that need a short path (a cluster's, a plugin's:
  unix sockets below them) are made in ``/tmp`` itself by :func:`hollowscale.paths.short_temp_dir`, which
  appends each to the session's ledger (``$HOLLOWSCALE_TEMP_LEDGER``, a file in the session's own folder,
  written by whichever process of the session made the folder). Every path of the ledger still there at
  the end is named: exactly what this session made, never a folder of the same name another run on the
  machine made meanwhile (guessing by name once failed a session for a kind test's ``hs-kindgpu-*``
  folder that another session removed a moment later).
* **Keys in the machine's temp folder.** ``/tmp`` (and ``$TMPDIR`` as the session found it, when it
  differs) is listed at the start and at the end, for keys and certificates a program wrote there despite
  ``$TMPDIR``.  An entry of the end's listing is named when all of these hold (:func:`new_entries`, a pure
  function over the two listings; only its keys and certificates are named, see :func:`finish`):

  - it is new: its name and inode were not in the first listing;
  - it is ours: owned by this uid and changed since the session started (``st_ctime``), so nothing
    another user made and nothing older is ever named;
  - it is what our code or tests write there: a file holding a PEM private key or certificate (the
    first line, ``-----BEGIN ... PRIVATE KEY-----``), or a name of :data:`OUR_NAMES` (``hs-*``,
    ``hollowscale-*``, the device and DRA plugin tests' ``dp-*``/``dra-*``, Chromium's singleton
    folders, ``torchinductor_*``, matplotlib's config fallback);
  - no process outside this session uses it (:func:`in_use_elsewhere`: a cwd, an open file or a command
    line under it; this session's processes carry :data:`sessionguard.MARKER_VAR`): the same machine
    runs other sessions and runs whose folders have the same names, and theirs are in use while they
    exist.

  :func:`finish` names only the keys and certificates among them (a folder of one of our names that is not
  in the ledger is another run's).  Keys are named first, then certificates.  These are not removed: the guard cannot be
  sure they are ours, the person reading the failure can.  ``pytest-of-<user>`` (pytest's own folder,
  which keeps the last three sessions' ``tmp_path`` by design) and Go's ``go-build*`` (removed by Go)
  are not ours to judge.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hollowscale.paths import TEMP_LEDGER_VAR

#: the session's own temp folder: a short name (unix socket paths under it are limited to 107 bytes)
SESSION_PREFIX = "hs-pytest-"
#: the session's ledger of what it made straight in /tmp (:func:`hollowscale.paths.record_temp`), in its folder
LEDGER = "temp-ledger"
#: what the guard itself makes in that folder (removed with it, never named)
GUARDS_OWN = ("kube-cache", LEDGER)
#: names our code and tests give what they put in the machine's temp folder
OUR_NAMES = re.compile(r"(hs-|hollowscale-|dp-|dra-|torchinductor_|\.?org\.chromium\.Chromium\.|"
                       r"\.com\.google\.Chrome\.|matplotlib-).*")
#: the first line of a PEM private key (PKCS#8, RSA, EC, encrypted, OpenSSH) or certificate
_PEM = re.compile(rb"-----BEGIN ([A-Z0-9 ]*)-----")
#: a file larger than this is not read for its first line (a key or certificate is a few KB)
_READ_AT_MOST = 1 << 20


@dataclass(frozen=True)
class Entry:
    """One entry of a temp folder, as :func:`listing` saw it."""

    name: str
    inode: int
    uid: int
    ctime: float
    is_dir: bool
    pem: str | None = None  # "private key", "certificate" or None (what the first line says)

    def describe(self, folder: Path) -> str:
        what = f" ({self.pem})" if self.pem else "/" if self.is_dir else ""
        return f"{folder / self.name}{what}"


def pem_kind(first_line: bytes) -> str | None:
    """What a file whose first line is ``first_line`` holds: "private key", "certificate" or None."""
    m = _PEM.match(first_line.strip())
    if m is None:
        return None
    label = m.group(1).decode()
    if label.endswith("PRIVATE KEY"):
        return "private key"
    return "certificate" if "CERTIFICATE" in label else None


def _first_line(path: Path, size: int) -> bytes:
    if size > _READ_AT_MOST:
        return b""
    try:
        with open(path, "rb") as fh:
            return fh.readline(256)
    except OSError:
        return b""


def listing(folder: Path) -> dict[str, Entry]:
    """The entries of ``folder`` (not below it), without following links; empty when it cannot be read."""
    out: dict[str, Entry] = {}
    try:
        names = os.listdir(folder)
    except OSError:
        return out
    for name in names:
        path = folder / name
        try:
            st = path.lstat()
        except OSError:
            continue  # gone meanwhile
        regular = stat.S_ISREG(st.st_mode)
        out[name] = Entry(name, st.st_ino, st.st_uid, st.st_ctime, stat.S_ISDIR(st.st_mode),
                          pem_kind(_first_line(path, st.st_size)) if regular else None)
    return out


def _order(entry: Entry) -> tuple[int, str]:
    return ({"private key": 0, "certificate": 1}.get(entry.pem or "", 2), entry.name)


def new_entries(before: Mapping[str, Entry], after: Mapping[str, Entry], started: float, uid: int,
                exclude: Iterable[str] = ()) -> list[Entry]:
    """The entries of ``after`` that this session made, by the rules of the module docstring (all but the
    check for use by other processes): new (name and inode), owned by ``uid``, changed at or after
    ``started`` (a second of slack for file systems that keep coarse times), a key, a certificate or one
    of :data:`OUR_NAMES`; never a name in ``exclude``.  Keys first, then certificates, then by name."""
    skip = set(exclude)
    found = []
    for name, entry in after.items():
        old = before.get(name)
        if name in skip or (old is not None and old.inode == entry.inode):
            continue
        if entry.uid != uid or entry.ctime < started - 1.0:
            continue
        if entry.pem is not None or OUR_NAMES.fullmatch(name):
            found.append(entry)
    return sorted(found, key=_order)


def in_use_elsewhere(paths: list[Path], session: str, marker_var: str) -> set[Path]:
    """Those of ``paths`` a running process outside this session uses: its cwd, an open file or an
    argument of its command line is one of them or below one.  A process of this session (its
    environment carries ``marker_var`` = ``session``) does not count."""
    import psutil

    if not paths:
        return set()
    prefixes = [(p, f"{p}/") for p in map(str, paths)]
    used: set[Path] = set()

    def mark(text: str) -> None:
        for whole, below in prefixes:
            if below in text or text.endswith(whole):  # also as an option's value: --data-dir=/tmp/x/...
                used.add(Path(whole))

    for proc in psutil.process_iter():
        try:
            if proc.pid == os.getpid() or proc.environ().get(marker_var) == session:
                continue
            with contextlib.suppress(psutil.Error, OSError):
                mark(proc.cwd())
            with contextlib.suppress(psutil.Error, OSError):
                for f in proc.open_files():
                    mark(f.path)
            for arg in proc.cmdline():
                mark(arg)
        except (psutil.Error, OSError):
            continue
    return used


# ------------------------------------------------------------------------------ the session's state
@dataclass
class _Session:
    own: Path  # the session's temp folder (made by start)
    started: float
    folders: dict[Path, dict[str, Entry]]  # machine temp folder -> its listing at the start
    env: dict[str, str | None]  # $TMPDIR, $KUBECACHEDIR and the ledger's variable as the session found them


_STATE: dict[str, _Session] = {}


def _machine_folders() -> list[Path]:
    """/tmp, and $TMPDIR as the session found it when it differs."""
    out = [Path("/tmp")]
    given = os.environ.get("TMPDIR")
    if given and Path(given).resolve() != Path("/tmp").resolve() and Path(given).is_dir():
        out.append(Path(given))
    return out


def start(config: Any) -> Path | None:
    """At the session's start (``pytest_configure``, the controller only): list the machine's temp folders,
    make the session's own and point ``$TMPDIR`` and ``tempfile.tempdir`` at it; that folder."""
    if hasattr(config, "workerinput") or "session" in _STATE:
        return None
    folders = _machine_folders()
    started = time.time()
    listings = {folder: listing(folder) for folder in folders}
    own = Path(tempfile.mkdtemp(prefix=SESSION_PREFIX, dir=folders[-1]))
    _STATE["session"] = _Session(own, started, listings,
                                 {v: os.environ.get(v) for v in ("TMPDIR", "KUBECACHEDIR", TEMP_LEDGER_VAR)})
    (own / LEDGER).touch()
    os.environ[TEMP_LEDGER_VAR] = str(own / LEDGER)
    os.environ["TMPDIR"] = str(own)
    tempfile.tempdir = str(own)
    if "KUBECACHEDIR" not in os.environ:
        (own / "kube-cache").mkdir()
        os.environ["KUBECACHEDIR"] = str(own / "kube-cache")
    config.add_cleanup(_abandon)  # a run that has no session (pytest --help) or dies before its end
    return own


def _abandon() -> None:
    """At pytest's unconfigure: when :func:`finish` did not run, remove the session's own temp folder
    (what is in it is named on stderr, unjudged: there was no session to fail)."""
    state = _STATE.pop("session", None)
    if state is None:
        return
    for line in leftovers_in_own(state.own):
        print(f"left in the test session's temp folder: {line}", file=sys.stderr)
    why = _remove_own(state.own)
    if why:
        print(why, file=sys.stderr)
    _put_back(state.env)


def _put_back(env: dict[str, str | None]) -> None:
    for var, value in env.items():
        if value is None:
            os.environ.pop(var, None)
        else:
            os.environ[var] = value
    tempfile.tempdir = None  # computed again from $TMPDIR when next asked


def leftovers_in_own(own: Path) -> list[str]:
    """What is left in the session's own temp folder besides pytest's ``pytest-of-<user>``, keys first."""
    after = listing(own)
    return [e.describe(own) for e in sorted(after.values(), key=_order)
            if not e.name.startswith("pytest-of-") and e.name not in GUARDS_OWN]


def recorded_leftovers(ledger: Path) -> list[str]:
    """The paths the ledger recorded that are still there, those holding a private key first."""
    try:
        recorded = dict.fromkeys(line.strip() for line in ledger.read_text(encoding="utf-8").splitlines())
    except OSError:
        return []
    left = [Path(p) for p in recorded if p and os.path.lexists(p)]

    def holds_key(path: Path) -> bool:
        files = [path] if not path.is_dir() else [p for p in path.rglob("*") if p.is_file() and not p.is_symlink()]
        return any(pem_kind(_first_line(f, f.stat().st_size)) == "private key" for f in files[:200])

    keyed = {p: holds_key(p) for p in left}
    return [f"{p}{'/' if p.is_dir() else ''}{' (holds a private key)' if keyed[p] else ''}"
            for p in sorted(left, key=lambda p: (not keyed[p], str(p)))]


def _remove_own(own: Path) -> str | None:
    """Remove the session's own temp folder (exactly the path :func:`start` made); why not, or None."""
    from hollowscale.cluster import clusterdir

    mounts = [m for m in clusterdir.mount_points() if m == str(own) or m.startswith(f"{own}/")]
    if mounts:
        return f"{own} was left: mount points are under it ({', '.join(mounts[:3])})"
    shutil.rmtree(own, ignore_errors=True)
    return f"{own} could not be removed whole" if own.exists() else None


def finish(session: Any) -> list[str]:
    """At the session's end (``pytest_sessionfinish``, the controller only, after the process guard):
    name what this session left in the temp folders, fail the session when anything, and remove the
    session's own temp folder; the lines written."""
    from sessionguard import MARKER_VAR

    state = _STATE.pop("session", None)
    if hasattr(session.config, "workerinput") or state is None:
        return []
    lines = leftovers_in_own(state.own) + recorded_leftovers(state.own / LEDGER)
    marker = os.environ.get(MARKER_VAR, "")
    for folder, before in state.folders.items():
        # only keys and certificates: a folder of ours in /tmp is in the ledger, and one of our names that is
        # not is another run's (another session's own folder is that session's to judge and remove)
        found = [e for e in new_entries(before, listing(folder), state.started, os.geteuid(), {state.own.name})
                 if e.pem is not None and not e.name.startswith(SESSION_PREFIX)]
        busy = in_use_elsewhere([folder / e.name for e in found], marker, MARKER_VAR) if found else set()
        lines += [e.describe(folder) for e in found if folder / e.name not in busy]
    not_removed = _remove_own(state.own)
    _put_back(state.env)
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    out = []
    if lines:
        out = [f"{len(lines)} file(s) or folder(s) this test session wrote in the temp folder were still there "
               "at its end (keys first):", *(f"  {line}" for line in lines)]
        session.exitstatus = 1  # pytest.ExitCode.TESTS_FAILED
    if not_removed:
        out.append(not_removed)
        session.exitstatus = 1
    for line in out:
        if reporter is not None:
            reporter.write_line(line, red=True)
        else:
            print(line)
    return out
