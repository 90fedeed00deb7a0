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
        x = [1.0, float(nodes), float(pods_per_s)]
        y = _dot(x, self.coef)
        out: dict[str, Any] = {"nodes": nodes, "pods_per_s": round(pods_per_s, 3), "value": round(y, 4),
                               "interval_95": None, "error_95": None}
        if self.xtx_inv is None:  # nodes and pods/s not separated: any projection in nodes would be made up
            out.update(value=None, why=self.note)
        if self.residual_sd is not None and self.xtx_inv is not None and self.dof >= 1:
            var = self.residual_sd ** 2 * (1.0 + _dot(x, _matvec(self.xtx_inv, x)))
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


def _dot(a: Sequence[float], b: Sequence[float]) -> float:
    return float(sum(x * y for x, y in zip(a, b, strict=True)))


def _matvec(m: Sequence[Sequence[float]], v: Sequence[float]) -> list[float]:
    return [_dot(row, v) for row in m]


def invert(m: Sequence[Sequence[float]], tol: float = 1e-10) -> tuple[list[list[float]] | None, int]:
    """(inverse or None when singular, rank) of a small square matrix: Gauss-Jordan with partial pivoting
    on the matrix scaled to a unit diagonal, so nodes (hundreds) and pods/s (units) weigh alike."""
    n = len(m)
    d = [abs(m[i][i]) ** 0.5 or 1.0 for i in range(n)]
    a = [[m[i][j] / (d[i] * d[j]) for j in range(n)] + [1.0 if i == j else 0.0 for j in range(n)] for i in range(n)]
    rank = 0
    singular = False
    for col in range(n):
        piv = max(range(col, n), key=lambda r: abs(a[r][col]))
        if abs(a[piv][col]) <= tol:
            singular = True
            continue
        rank += 1
        a[col], a[piv] = a[piv], a[col]
        p = a[col][col]
        a[col] = [v / p for v in a[col]]
        for r in range(n):
            if r != col and a[r][col] != 0.0:
                f = a[r][col]
                a[r] = [v - f * w for v, w in zip(a[r], a[col], strict=True)]
    if singular:
        return None, rank
    return [[a[i][n + j] / (d[i] * d[j]) for j in range(n)] for i in range(n)], rank


def fit_cost(nodes: Sequence[float], pods_per_s: Sequence[float], cost: Sequence[float]) -> Fit | None:
    """Least squares of ``cost`` on nodes and pods/s (None with fewer than two points)."""
    n = len(cost)
    if n < 2:
        return None
    rows = [[1.0, float(a), float(b)] for a, b in zip(nodes, pods_per_s, strict=True)]
    y = [float(v) for v in cost]
    xtx = [[sum(r[i] * r[j] for r in rows) for j in range(3)] for i in range(3)]
    xty = [sum(r[i] * v for r, v in zip(rows, y, strict=True)) for i in range(3)]
    xtx_inv, rank = invert(xtx)
    dof = n - 3
    spans = ((int(min(nodes)), int(max(nodes))), (float(min(pods_per_s)), float(max(pods_per_s))))
    if xtx_inv is None:
        note = (f"the points do not separate nodes from pods/s (rank {rank} < 3): need at least two sizes and two "
                "rates; no coefficients, error or projection can be given")
        mean = sum(y) / n
        return Fit([mean, 0.0, 0.0], [None] * 3, None, n, dof, spans[0], spans[1], None, note)
    coef = _matvec(xtx_inv, xty)
    resid = [v - _dot(r, coef) for r, v in zip(rows, y, strict=True)]
    if dof < 1:
        note = f"{n} points for 3 coefficients: no residual degrees of freedom, no error can be given"
        return Fit(coef, [None] * 3, None, n, dof, spans[0], spans[1], xtx_inv, note)
    s2 = sum(r * r for r in resid) / dof
    se: list[float | None] = [max(xtx_inv[i][i] * s2, 0.0) ** 0.5 for i in range(3)]
    note = ""
    if dof < 5 or len(set(nodes)) < 3:
        note = (f"{n} points over {len(set(nodes))} sizes ({dof} residual degrees of freedom): the error is large "
                "and the straight-line-in-nodes assumption is untested beyond the sizes measured")
    return Fit(coef, se, s2 ** 0.5, n, dof, spans[0], spans[1], xtx_inv, note)


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
