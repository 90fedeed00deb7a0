"""A workload trace replayed through the real scheduler (issue 28).  One room:

- :mod:`.inspection`: ``hollowscale trace inspect``'s text (what a trace holds, from
  :func:`hollowscale.trace.inspect_trace`);
- :mod:`.cli`: the ``hollowscale trace`` command group (``inspect``, ``excerpt``).

The trace format, its readers and its figures are :mod:`hollowscale.trace` (a lower floor, so the
scenario can check a trace before anything starts).
"""
