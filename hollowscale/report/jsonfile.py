"""``summary.json`` (and every JSON file of a report) on disk: written atomically without NaN or
infinity (JSON has neither: they become null), read back with the fields every summary has checked."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from hollowscale.report.verdicts import REQUIRED


def _clean(o: Any) -> Any:
    """``o`` as JSON can hold it: NaN and infinity as None, paths as text, tuples as lists."""
    if isinstance(o, float) and (math.isnan(o) or math.isinf(o)):
        return None
    if isinstance(o, dict):
        return {str(k): _clean(v) for k, v in o.items()}
    if isinstance(o, list | tuple):
        return [_clean(v) for v in o]
    if isinstance(o, Path):
        return str(o)
    return o


def write_json(path: Path, doc: Any) -> None:
    """Write ``doc`` to ``path`` through a temporary file (a reader never sees half of it)."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(_clean(doc), indent=2, sort_keys=False) + "\n")
    os.replace(tmp, path)


def load_summary(run_dir: Path) -> dict[str, Any]:
    """A run's ``summary.json`` (``run_dir`` is its folder or the file); ValueError when it lacks a required field."""
    path = Path(run_dir) / "summary.json" if Path(run_dir).is_dir() else Path(run_dir)
    doc = json.loads(path.read_text())
    missing = [k for k in REQUIRED if k not in doc]
    if missing:
        raise ValueError(f"{path}: not a hollowscale summary (missing {', '.join(missing)})")
    return doc
