"""``hollowscale plan``: capacity planning by sweeping cluster size, mix and profile, bisecting on rate.

One job per module: :mod:`.grid` (sweep cells and the point scenarios), :mod:`.bisect` (the knee
search, pure), :mod:`.state` (resumable plan state), :mod:`.window` (a point's figures with the
warm-up left out), :mod:`.scrape` (the control plane's own metrics over the measured window),
:mod:`.points` (one short run per point), :mod:`.fit` (control-plane cost fit and projections),
:mod:`.report` (capacity.json/.md/.html), :mod:`.planner` (the loop, the clusters, the ETA) and
:mod:`.cli` (the command).
"""
