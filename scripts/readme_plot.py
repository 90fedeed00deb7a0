"""Write one plot of a run's report as a PNG, drawn by the report's own plotting code (for docs/img/).

Why this exists: ``report.html`` embeds its plots as inline SVG, and a README shows a picture file.
Redrawing the plot by hand would show something the report never drew; so this calls the report's
own :func:`hollowscale.report.html.plots` on the run's ``summary.json`` and ``series.json`` and only
changes the output format (the figure is saved as PNG instead of inline SVG).

    .venv/bin/python scripts/readme_plot.py reports/20261207-074030-smoke --plot plot-throughput \
        --out docs/img/smoke-throughput.png

It reads the run folder and writes the one file given; nothing else.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt

from hollowscale.report import html

#: the plot ids ``report.html`` gives its figures (``<figure id=...>``)
PLOT_IDS = ("plot-startup", "plot-throughput", "plot-pods", "plot-gpu", "plot-api-time", "plot-api-verb")


def render_png(run_dir: Path, plot_id: str, dpi: int = 110) -> bytes:
    """The PNG of plot ``plot_id`` as the report of ``run_dir`` draws it."""
    summary = json.loads((run_dir / "summary.json").read_text())
    series = json.loads((run_dir / "series.json").read_text())
    pngs: list[bytes] = []

    def as_png(fig: Any) -> str:  # stands in for html.svg: the same figure, saved as PNG
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
        plt.close(fig)
        pngs.append(buf.getvalue())
        return str(len(pngs) - 1)

    original = html.svg
    html.svg = as_png
    try:
        drawn = html.plots(series.get("timeline") or {}, series.get("prometheus"),
                           (summary.get("measurements") or {}).get("api_latency_ms") or {}, html.fault_marks(summary))
    finally:
        html.svg = original
    for pid, _title, _source, index in drawn:
        if pid == plot_id:
            return pngs[int(index)]
    raise SystemExit(f"{run_dir}: the report draws no plot {plot_id!r} (it draws: {', '.join(p for p, *_ in drawn)})")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/readme_plot.py",
                                     description="Write one plot of a run's report as a PNG (the report's own code).")
    parser.add_argument("run_dir", type=Path, help="a run folder (reports/<run-id>) with summary.json and series.json")
    parser.add_argument("--plot", default="plot-throughput", choices=PLOT_IDS, help="which plot (default: %(default)s)")
    parser.add_argument("--out", type=Path, required=True, help="the PNG to write")
    parser.add_argument("--dpi", type=int, default=110, help="resolution (default: %(default)s)")
    args = parser.parse_args(argv)
    data = render_png(args.run_dir, args.plot, args.dpi)
    args.out.write_bytes(data)
    print(f"wrote {args.out} ({len(data):,} bytes, {args.plot} of {args.run_dir})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
