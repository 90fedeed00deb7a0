"""Batch scheduling in a run: teams with queues and quotas, priority classes, gangs, and the variants one
scenario is compared under (default scheduler, gang, queues, gang + queues).  One room:

- :mod:`.objects`: the cluster objects the load needs before it starts (PriorityClasses, Kueue's
  ResourceFlavors, ClusterQueues and LocalQueues, Volcano queues), created and deleted by uid;
- :mod:`.figures`: the batch figures from the watch timeline (partially started jobs, wasted
  GPU-seconds, deadlocks, queue waits, tenant shares, preemptions; pure);
- :mod:`.promfigures`: Kueue's and the scheduler's batch metrics and their cross-check with the timeline;
- :mod:`.summary`: which runs get the batch figures, and their place in ``summary.json``;
- :mod:`.comparison`: the variants side by side (``comparison.{json,md,html}``).

The batch part of the scenario model (tenants, cohorts, priority classes, variants) stays in
:mod:`hollowscale.scenario.batch`, beside the model that composes it (the scenario floor is below this
one); running each variant on a fresh cluster is :mod:`hollowscale.run.variants` (it runs the Runner).
"""
