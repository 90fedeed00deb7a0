"""Validation errors for scenario files: every message names the file, the field path and what was expected."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FieldError:
    """One problem in a scenario file.

    Attributes:
        path: dotted/indexed field path, e.g. ``workloads[2].roles[0].resources.cpu`` ("" for the root).
        message: what was expected and what was found.
    """

    path: str
    message: str

    def render(self, source: str) -> str:
        where = f"{source}: {self.path}" if self.path else source
        return f"{where}: {self.message}"


class ScenarioError(ValueError):
    """A scenario that cannot be used; ``errors`` holds every problem found, not only the first."""

    def __init__(self, source: str, errors: list[FieldError]):
        self.source = source
        self.errors = list(errors)
        lines = [e.render(source) for e in self.errors]
        super().__init__("\n".join(lines) if lines else f"{source}: invalid scenario")
