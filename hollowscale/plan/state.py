"""The resumable plan state: every measured point, keyed, written atomically after each point.

``plan.json`` in the plan folder holds the scenario's fingerprint and the points measured so far.
A plan started again on the same folder skips the points it finds (an interrupted point is never
recorded: it is measured again); a changed scenario is refused unless ``--fresh`` starts over.
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
        if self.path.exists() and not fresh:
            try:
                doc = json.loads(self.path.read_text())
            except (OSError, json.JSONDecodeError) as exc:
                raise PlanStateError(f"{self.path}: unreadable plan state ({exc}); use --fresh to start over") from None
            if doc.get("fingerprint") != plan_fingerprint:
                raise PlanStateError(f"{self.path} belongs to another plan (scenario or sweep changed: fingerprint "
                                     f"{doc.get('fingerprint')} != {plan_fingerprint}); use --fresh to start over "
                                     "or --out for another folder")
            self.points = dict(doc.get("points") or {})
            self.resumed = len(self.points)

    def get(self, key: str) -> dict[str, Any] | None:
        return self.points.get(key)

    def record(self, key: str, point: dict[str, Any]) -> None:
        """Keep a measured point and persist the state at once."""
        self.points[key] = point
        self.save()

    def save(self) -> None:
        write_json_atomic(self.path, {"fingerprint": self.fingerprint, "points": self.points})
