"""Reports of a run: ``summary.json``, ``summary.md``, ``report.html``, ``junit.xml``, ``reports/latest``."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hollowscale.report import html, junit, markdown, perfdata
from hollowscale.report.jsonfile import load_summary, write_json
from hollowscale.report.latest import update_latest
from hollowscale.report.sections import ReportSection
from hollowscale.report.verdicts import EXIT_CODES, finalize, state_of

__all__ = ["EXIT_CODES", "finalize", "load_summary", "state_of", "update_latest", "write_json", "write_report"]


def write_report(run_dir: Path, summary: dict[str, Any], series: dict[str, Any],
                 prom_series: dict[str, Any] | None, sections: Sequence[ReportSection] = ()) -> dict[str, Path]:
    """Write every report file of a (finalized) summary into ``run_dir``; ``sections``: the parts of
    ``summary.md`` and ``report.html`` the run's features add (:mod:`hollowscale.report.sections`)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    paths = {
        "summary.json": run_dir / "summary.json",
        "series.json": run_dir / "series.json",
        "summary.md": run_dir / "summary.md",
        "report.html": run_dir / "report.html",
        "junit.xml": run_dir / "junit.xml",
    }
    write_json(paths["series.json"], {"timeline": series, "prometheus": prom_series})
    write_json(paths["summary.json"], summary)
    paths["summary.md"].write_text(markdown.render(summary, sections))
    paths["junit.xml"].write_text(junit.render(summary))
    paths["report.html"].write_text(html.render(summary, series, prom_series, sections))
    perfdata.write_perfdata(run_dir, summary)  # every figure as ClusterLoader2 PerfData in run_dir/perfdata/
    return paths
