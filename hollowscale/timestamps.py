"""How hollowscale writes a moment in its files: ISO 8601, UTC, milliseconds, ``Z`` (``summary.json``'s
``started_at``, a fault's ``fired_at``)."""

from __future__ import annotations

import datetime as dt


def iso(t: float) -> str:
    """Epoch seconds -> ISO 8601 UTC with milliseconds (``2026-12-05T12:00:00.000Z``)."""
    return dt.datetime.fromtimestamp(t, dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
