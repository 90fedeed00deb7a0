"""What a feature of a run adds to ``summary.md`` and ``report.html``.

The report renders what every run has; a feature that puts a section of its own into the summary
(the real distillation jobs: :class:`hollowscale.distilljobs.report.DistillJobsSection`) hands the
report an object of this shape, so the report's floor never imports a feature's room.  Each part comes
after the control-plane tables, in the order the sections are given.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class ReportSection(Protocol):
    """A feature's part of the report (an empty list when the summary holds nothing of it)."""

    def markdown(self, summary: dict[str, Any]) -> list[str]:
        """Lines of ``summary.md``."""
        ...

    def html(self, summary: dict[str, Any]) -> list[str]:
        """Parts of ``report.html``."""
        ...
