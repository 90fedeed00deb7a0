"""Placement quality of a run whose pools have topology levels (issue 35): where each gang landed, how
fragmented the free GPUs were, how long gangs waited for Kueue and the scheduler, and the GPU-hours lost
to spread (see :mod:`hollowscale.topology.feature`).

Every figure comes from the API server (the pods' ``spec.nodeName`` and conditions, the Nodes' labels,
Kueue's Workloads) and the run's Prometheus; the levels and spread factors are defined once in
:mod:`hollow.pools` and :mod:`hollow.topology`.
"""
