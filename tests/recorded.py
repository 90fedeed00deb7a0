"""A real run's Prometheus answers, replayed: what :class:`hollowscale.measure.prom.PromQueries` asked it
and what it said, by query (``tests/fixtures/prometheus/*.json``).  No server: a query that was not
recorded gets no series, as an absent metric would."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hollowscale.measure.prom import PromQueries

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "prometheus"


def load(name: str) -> dict[str, Any]:
    """A recording: ``answers`` (query -> series), ``api_window`` and ``window`` (epoch s), ``recorded``."""
    doc: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text())
    return doc


class RecordedProm(PromQueries):
    """:class:`PromQueries` over recorded answers."""

    def __init__(self, answers: dict[str, list[dict[str, Any]]]) -> None:
        self.log = []
        self.answers = answers

    def instant(self, query: str, at: float, purpose: str) -> list[dict[str, Any]]:
        self.log.append({"query": query, "time": at, "purpose": purpose})
        return self.answers.get(query, [])
