"""Control-plane cost: cost = a + b * nodes + c * pods/s, least squares, with errors and projections.

Per component (apiserver, etcd, scheduler, controller-manager) and per resource (CPU cores over the
measured window, peak RSS MiB), over every measured point of a profile.  Standard errors come from the
residual variance (``s^2 (X'X)^-1``); a projection to 5,000 and 15,000 nodes is the fitted value with
a 95% prediction interval (Student t on the residual degrees of freedom).  Projections lie far outside
the measured sizes: they are labelled as such, and with few points or few sizes their interval is wide
(or cannot be computed, which the report says).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

PROJECT_TO = (5000, 15000)

# two-sided 95% Student t quantiles (0.975) for 1..30 degrees of freedom
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
         2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def t975(dof: int) -> float:
    """The 0.975 quantile of Student's t (1.96 + a small-sample term beyond the table)."""
    if dof < 1:
        return float("inf")
    return _T975[dof - 1] if dof <= len(_T975) else 1.96 + 2.4 / dof


@dataclass
class Fit:
    """``y = a + b * nodes + c * pods_per_s`` and what it rests on."""

    coef: list[float]
    stderr: list[float | None]
    residual_sd: float | None
    n: int
    dof: int
    nodes_range: tuple[int, int]
    rate_range: tuple[float, float]
    xtx_inv: list[list[float]] | None
    note: str = ""

    def predict(self, nodes: float, pods_per_s: float) -> dict[str, Any]:
        """Fitted value and 95% prediction interval at (nodes, pods/s), labelled a projection when
        outside the measured sizes."""
        x = np.array([1.0, nodes, pods_per_s])
        y = float(x @ np.array(self.coef))
        out: dict[str, Any] = {"nodes": nodes, "pods_per_s": round(pods_per_s, 3), "value": round(y, 4),
                               "interval_95": None, "error_95": None}
        if self.xtx_inv is None:  # nodes and pods/s not separated: any projection in nodes would be made up
            out.update(value=None, why=self.note)
        if self.residual_sd is not None and self.xtx_inv is not None and self.dof >= 1:
            var = self.residual_sd ** 2 * (1.0 + float(x @ np.array(self.xtx_inv) @ x))
            half = t975(self.dof) * var ** 0.5
            out.update(interval_95=[round(y - half, 4), round(y + half, 4)], error_95=round(half, 4))
        lo, hi = self.nodes_range
        if not lo <= nodes <= hi:
            out["projection"] = f"projection (extrapolated from {lo}..{hi} nodes)"
        return out

    def to_dict(self) -> dict[str, Any]:
        names = ("intercept", "per_node", "per_pod_per_s")
        return {"model": "a + b*nodes + c*pods_per_s", "n": self.n, "dof": self.dof,
                "coef": {k: round(v, 8) for k, v in zip(names, self.coef, strict=True)},
                "stderr": {k: (None if v is None else round(v, 8)) for k, v in zip(names, self.stderr, strict=True)},
                "residual_sd": None if self.residual_sd is None else round(self.residual_sd, 6),
                "nodes_range": list(self.nodes_range), "rate_range": list(self.rate_range), "note": self.note}


def fit_cost(nodes: Sequence[float], pods_per_s: Sequence[float], cost: Sequence[float]) -> Fit | None:
    """Least squares of ``cost`` on nodes and pods/s (None with fewer than two points)."""
    n = len(cost)
    if n < 2:
        return None
    x = np.column_stack([np.ones(n), np.asarray(nodes, float), np.asarray(pods_per_s, float)])
    y = np.asarray(cost, float)
    rank = int(np.linalg.matrix_rank(x))
    coef, *_ = np.linalg.lstsq(x, y, rcond=None)
    dof = n - 3
    note = ""
    if rank < 3:
        note = (f"the points do not separate nodes from pods/s (rank {rank} < 3): need at least two sizes and two "
                "rates; coefficients are a minimum-norm solution, no error can be given")
        return Fit([float(v) for v in coef], [None] * 3, None, n, dof, (int(min(nodes)), int(max(nodes))),
                   (float(min(pods_per_s)), float(max(pods_per_s))), None, note)
    resid = y - x @ coef
    xtx_inv = np.linalg.inv(x.T @ x)
    if dof < 1:
        note = f"{n} points for 3 coefficients: no residual degrees of freedom, no error can be given"
        return Fit([float(v) for v in coef], [None] * 3, None, n, dof, (int(min(nodes)), int(max(nodes))),
                   (float(min(pods_per_s)), float(max(pods_per_s))), xtx_inv.tolist(), note)
    s2 = float(resid @ resid) / dof
    se = [float(v) ** 0.5 for v in np.diag(xtx_inv) * s2]
    if dof < 5 or len(set(nodes)) < 3:
        note = (f"{n} points over {len(set(nodes))} sizes ({dof} residual degrees of freedom): the error is large "
                "and the straight-line-in-nodes assumption is untested beyond the sizes measured")
    return Fit([float(v) for v in coef], se, s2 ** 0.5, n, dof, (int(min(nodes)), int(max(nodes))),
               (float(min(pods_per_s)), float(max(pods_per_s))), xtx_inv.tolist(), note)


def cost_fits(points: Sequence[dict[str, Any]], nodes_of: dict[str, int], at_pods_per_s: float) -> dict[str, Any]:
    """Per component and resource: the fit and its projections to :data:`PROJECT_TO` nodes at
    ``at_pods_per_s``.  ``points`` are plan point records with ``cell_key``; ``nodes_of`` maps it to nodes."""
    out: dict[str, Any] = {}
    usable = [p for p in points if p.get("control_plane") and p.get("figures", {}).get("pods_per_s") is not None]
    comps = sorted({c for p in usable for c in p["control_plane"]["components"]})
    for comp in comps:
        for resource in ("cpu_cores_avg", "rss_mib_max"):
            rows = [(nodes_of[p["cell_key"]], p["figures"]["pods_per_s"], p["control_plane"]["components"][comp][resource])
                    for p in usable if (p["control_plane"]["components"].get(comp) or {}).get(resource) is not None]
            f = fit_cost([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows])
            if f is None:
                continue
            out.setdefault(comp, {})[resource] = {
                "fit": f.to_dict(),
                "projections": [f.predict(n, at_pods_per_s) for n in PROJECT_TO],
                "data": [{"nodes": r[0], "pods_per_s": r[1], "value": r[2]} for r in rows],
            }
    return out
