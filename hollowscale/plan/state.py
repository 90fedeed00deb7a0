"""The resumable plan state: every measured point, keyed, written atomically after each point.

``plan.json`` in the plan folder holds the scenario's fingerprint and the points measured so far.
A plan started again on the same folder skips the points it finds (an interrupted point is never
recorded: it is measured again); a changed scenario is refused unless ``--fresh`` starts over.

``plan.json`` is written when the plan starts, so it marks the folder as a plan's: a folder that holds
anything but no ``plan.json`` of ours (a user's folder given as ``--out``) is refused, ``--fresh`` or not,
and nothing in it is written or changed.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

STATE_FILE = "plan.json"


class PlanStateError(RuntimeError):
    """The plan folder holds another plan's state (or an unreadable one)."""


def fingerprint(doc: Any) -> str:
    """A stable hash of what decides the points' results (the scenario as resolved)."""
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()[:16]


def point_key(cell_key: str, rate: float) -> str:
    """``<cell>@<rate>``: one measured point."""
    return f"{cell_key}@{rate:g}"


def write_json_atomic(path: Path, doc: Any) -> None:
    """Write ``doc`` so that a reader (or a crash) never sees half a file: temp file, fsync, rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(doc, fh, indent=2, default=str)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class PlanState:
    """Points measured so far (``key -> record``), persisted in ``folder/plan.json``."""

    def __init__(self, folder: Path, plan_fingerprint: str, fresh: bool = False):
        self.folder = folder
        self.path = folder / STATE_FILE
        self.fingerprint = plan_fingerprint
        self.points: dict[str, dict[str, Any]] = {}
        self.resumed = 0
        doc = self._read_ours()
        if doc is not None and not fresh:
            if doc.get("fingerprint") != plan_fingerprint:
                raise PlanStateError(f"{self.path} belongs to another plan (scenario or sweep changed: fingerprint "
                                     f"{doc.get('fingerprint')} != {plan_fingerprint}); use --fresh to start over "
                                     "or --out for another folder")
            self.points = dict(doc.get("points") or {})
            self.resumed = len(self.points)
        self.save()  # the folder is a plan's from now on

    def _read_ours(self) -> dict[str, Any] | None:
        """The plan state in the folder, None for a new or empty folder.

        Raises:
            PlanStateError: the folder holds something and no plan state of ours (never written to).
        """
        if not self.folder.exists():
            return None
        if not self.folder.is_dir():
            raise PlanStateError(f"{self.folder} is a file, not a plan folder; give --out a new or empty folder")
        try:
            doc = json.loads(self.path.read_text())
        except FileNotFoundError:
            doc = None
        except (OSError, json.JSONDecodeError) as exc:
            raise PlanStateError(f"{self.path} is not a plan state of hollowscale's ({exc}); it is left as it is: "
                                 "give --out another folder") from None
        if isinstance(doc, dict) and "fingerprint" in doc and isinstance(doc.get("points"), dict):
            return doc
        if doc is not None or any(self.folder.iterdir()):
            entries = sorted(p.name for p in self.folder.iterdir())
            raise PlanStateError(f"{self.folder} is not empty ({', '.join(entries[:3])}{' ...' if len(entries) > 3 else ''}"
                                 f") and holds no plan state of hollowscale's ({STATE_FILE}): nothing in it is changed; "
                                 "give --out a new or empty folder")
        return None

    def get(self, key: str) -> dict[str, Any] | None:
        return self.points.get(key)

    def record(self, key: str, point: dict[str, Any]) -> None:
        """Keep a measured point and persist the state at once."""
        self.points[key] = point
        self.save()

    def save(self) -> None:
        write_json_atomic(self.path, {"fingerprint": self.fingerprint, "points": self.points})
