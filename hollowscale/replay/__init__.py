"""A workload trace replayed through the real scheduler (issue 28).  One room:

- :mod:`.pods`: a trace pod as the API objects the replay creates (the pod; its ResourceClaim when GPUs
  are DRA devices shared by consumable capacity; a priority class per QoS class);
- :mod:`.driver`: the paper's protocol on a cluster (one pod at a time, each waiting for the
  scheduler's verdict; unschedulable pods deleted, never retried) and what the API server's objects
  say was allocated at the end;
- :mod:`.timed`: the time-faithful replay (``mode: timed``): the trace's own pods created and deleted
  at their times, compressed, never waiting for a verdict;
- :mod:`.modes`: the two behind one interface for the runner, the mode choosing its driver in one place;
- :mod:`.figures`: what a replay measured (allocation curves, first failure, pods that never ran by
  kind and reason, fragmentation, the scheduler's pace, the checks; a timed replay's pending time per
  QoS class, unschedulable pods and GPU allocation over time);
- :mod:`.inspection`: ``hollowscale trace inspect``'s text;
- :mod:`.cli`: the ``hollowscale trace`` command group (``inspect``, ``excerpt``).

The trace format, its readers, the paper's sequence and fragmentation measure and the trace's nodes as
pools are :mod:`hollowscale.trace` (a lower floor, so the scenario can check a trace before anything
starts).
"""
