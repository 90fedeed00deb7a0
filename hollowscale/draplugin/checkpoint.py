"""The plugin's record of prepared claims, so a restarted plugin answers as before.

The kubelet retries: NodePrepareResources for a claim the plugin already prepared (after a lost answer or
a kubelet restart) must get the same devices back, and NodeUnprepareResources for one it does not know (or
no longer knows) must succeed.  The record is ``<plugin dir>/checkpoint.json`` (``{"version": 1, "claims":
{uid: PreparedClaim}}``), written atomically after every change; the CDI spec files are written from it
again at start when one is missing (a CDI dir under ``/run`` is gone after a reboot).
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

from hollowscale.draplugin.prepare import PreparedClaim

VERSION = 1


class CheckpointError(RuntimeError):
    """The checkpoint file cannot be read (the message names it); the plugin refuses to start over it."""


class Checkpoint:
    """Prepared claims by UID, kept in ``path``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._claims: dict[str, PreparedClaim] = self._load()

    def _load(self) -> dict[str, PreparedClaim]:
        try:
            doc: Any = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise CheckpointError(f"cannot read the checkpoint {self.path}: {exc}; move it away to start "
                                  "without the prepared claims it holds") from None
        if not isinstance(doc, dict) or doc.get("version") != VERSION or not isinstance(doc.get("claims"), dict):
            raise CheckpointError(f"{self.path} is not a version-{VERSION} checkpoint of this plugin")
        try:
            return {uid: PreparedClaim.from_dict(c) for uid, c in doc["claims"].items()}
        except (KeyError, TypeError) as exc:
            raise CheckpointError(f"{self.path}: a claim entry lacks {exc}") from None

    def _save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.tmp")
        doc = {"version": VERSION, "claims": {uid: c.to_dict() for uid, c in sorted(self._claims.items())}}
        tmp.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
        os.replace(tmp, self.path)

    def get(self, uid: str) -> PreparedClaim | None:
        with self._lock:
            return self._claims.get(uid)

    def all(self) -> list[PreparedClaim]:
        with self._lock:
            return list(self._claims.values())

    def put(self, claim: PreparedClaim) -> None:
        with self._lock:
            self._claims[claim.uid] = claim
            self._save()

    def remove(self, uid: str) -> PreparedClaim | None:
        with self._lock:
            gone = self._claims.pop(uid, None)
            if gone is not None:
                self._save()
            return gone
