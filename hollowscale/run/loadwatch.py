"""Notice a load that fails wholesale, so the run stops as incomplete instead of judging SLOs.

When every create is refused (the namespace vanished, RBAC forbids it, the apiserver rejects the
template), nothing reaches the scheduler and a report of "SLO failed" would blame the wrong thing.
Locust writes its statistics CSV every second; :class:`CreateFailureWatch` reads it and says so
when the last ``threshold`` creates since a success were all failures, naming Locust's error.
"""

from __future__ import annotations

import csv
from pathlib import Path


def post_counts(stats_csv: Path) -> tuple[int, int]:
    """(requests, failures) of the create (POST) calls so far; (0, 0) before the first write."""
    requests = failures = 0
    try:
        with stats_csv.open() as fh:
            for row in csv.DictReader(fh):
                if row.get("Type") == "POST" and row.get("Name") != "Aggregated":
                    requests += int(float(row.get("Request Count") or 0))
                    failures += int(float(row.get("Failure Count") or 0))
    except (OSError, ValueError, csv.Error):
        return 0, 0
    return requests, failures


def first_failure(failures_csv: Path) -> str:
    """The most frequent error Locust recorded for creates ('' when none)."""
    best, count = "", -1
    try:
        with failures_csv.open() as fh:
            for row in csv.DictReader(fh):
                n = int(float(row.get("Occurrences") or 0))
                if n > count:
                    best, count = f"{row.get('Method', '')} {row.get('Name', '')}: {row.get('Error', '')}".strip(), n
    except (OSError, ValueError, csv.Error):
        return ""
    return best[:400]


class CreateFailureWatch:
    """Reads ``<prefix>_stats.csv``/``<prefix>_failures.csv`` and reports a wholesale failure."""

    def __init__(self, csv_prefix: Path, threshold: int):
        self.stats = Path(f"{csv_prefix}_stats.csv")
        self.failures = Path(f"{csv_prefix}_failures.csv")
        self.threshold = threshold
        self._base = (0, 0)
        self._successes = 0

    def poll(self) -> str | None:
        """None while creates succeed; the cause once the last ``threshold``+ creates all failed."""
        requests, failures = post_counts(self.stats)
        successes = requests - failures
        if successes > self._successes:
            self._successes = successes
            self._base = (requests, failures)
            return None
        tried, failed = requests - self._base[0], failures - self._base[1]
        if tried >= self.threshold and failed == tried:
            cause = first_failure(self.failures) or "no error text recorded"
            return f"load failed wholesale: the last {tried} creates were all refused ({cause})"
        return None
