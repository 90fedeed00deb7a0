"""One scenario under several variants (default scheduler, gang, queues, gang + queues), each on a
fresh cluster with the same arrival seed, and one comparison report.

``hollowscale run`` on a scenario with ``variants:`` writes ``OUT/<stamp>-<scenario>/``: one run folder
per variant (``<variant>/summary.json`` ...) and ``comparison.{json,md,html}`` beside them; ``OUT/latest``
points at the parent.  The exit code is the worst of the variants' (interrupted > incomplete > SLO
failed > jobs left unfinished > passed); an interruption stops the variants that have not started.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hollowscale.batch.comparison import write_comparison
from hollowscale.paths import fresh_dir
from hollowscale.report import update_latest
from hollowscale.run.orchestrator import (
    EXIT_INCOMPLETE,
    EXIT_INTERRUPTED,
    EXIT_PASSED,
    EXIT_SLO_FAILED,
    EXIT_UNFINISHED,
    Runner,
)
from hollowscale.scenario import Scenario

_SEVERITY = {EXIT_PASSED: 0, EXIT_UNFINISHED: 1, EXIT_SLO_FAILED: 2, EXIT_INCOMPLETE: 3, EXIT_INTERRUPTED: 4}


@dataclass
class VariantResult:
    name: str
    code: int
    run_dir: Path
    summary: dict[str, Any]


def run_variants(sc: Scenario, out_root: Path, keep_cluster: bool = False, quiet: bool = False,
                 locust_processes: int = 1) -> tuple[int, Path, list[VariantResult]]:
    """Run every variant of ``sc`` in order; returns (exit code, parent folder, results)."""
    parent = fresh_dir(Path(out_root), f"{time.strftime('%Y%m%d-%H%M%S')}-{sc.name}")
    results: list[VariantResult] = []
    for v in sc.variants:
        run_id = f"{parent.name}-{v.name}"[-63:].lstrip("-.")
        runner = Runner(sc.with_variant(v), parent, keep_cluster=keep_cluster, quiet=quiet, run_id=run_id,
                        locust_processes=locust_processes, run_dir=parent / v.name, point_latest=False)
        code = runner.run()
        results.append(VariantResult(v.name, code, runner.run_dir, runner.summary))
        if code == EXIT_INTERRUPTED:
            break
    write_comparison(parent, sc.name, [(r.name, r.run_dir) for r in results])
    update_latest(Path(out_root), parent)
    worst = max((r.code for r in results), key=lambda c: _SEVERITY.get(c, 3), default=EXIT_INCOMPLETE)
    return worst, parent, results
