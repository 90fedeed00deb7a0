"""The final figures of a Locust run in its ``--csv`` files, written once more when Locust quits.

Locust rewrites ``<prefix>_stats.csv``, ``_failures.csv`` and ``_exceptions.csv`` from a greenlet
once a second and, at shutdown, only closes them: whatever finished in the last second before the
end (the creates of a curve's final second, the latency events of its last jobs) is in the console
summary but not in the CSVs (locustio/locust#1806, #2299).  A run that checks "every create Locust
counted is a Job the apiserver saw" then fails by one now and then.

:func:`write_final_csvs` runs on Locust's ``quit`` event, after every user stopped, and writes the
three files anew from the runner's stats.  Each goes to a temporary file that then replaces the
original by rename: Locust's writer still holds the old file open and flushes into it as it closes,
so its stale rows land in the unlinked file, never over the final ones.  The appended
``_stats_history.csv`` is a time series and is left as Locust wrote it.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from locust.stats import PERCENTILES_TO_REPORT, StatsCSV

#: suffix of each file Locust's ``--csv PREFIX`` writes and rewrites, with the StatsCSV method that
#: writes its header and rows
FINAL_FILES: tuple[tuple[str, Callable[[StatsCSV, Any], None]], ...] = (
    ("_stats.csv", StatsCSV.requests_csv),
    ("_failures.csv", StatsCSV.failures_csv),
    ("_exceptions.csv", StatsCSV.exceptions_csv),
)


def write_final_csvs(environment: Any, prefix: str) -> list[Path]:
    """Write the request, failure and exception CSVs of ``prefix`` from ``environment``'s stats now;
    the paths written.  Each file is replaced whole (temporary file + rename), never half-written."""
    table = StatsCSV(environment, PERCENTILES_TO_REPORT)
    written: list[Path] = []
    for suffix, write_rows in FINAL_FILES:
        path = Path(prefix + suffix)
        tmp = path.with_name(f".{path.name}.final")
        with tmp.open("w", newline="") as fh:
            write_rows(table, csv.writer(fh))
        os.replace(tmp, path)
        written.append(path)
    return written
