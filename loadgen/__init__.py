"""Locust load generation for hollowscale (runnable alone: ``locust -f loadgen/locustfile.py``).

- :mod:`loadgen.spec`: the typed load spec (:class:`~loadgen.spec.WorkloadSpec`,
  :class:`~loadgen.spec.ArrivalSpec` with the arrival curve's maths, :class:`~loadgen.spec.LoadSpec`),
  validated with :mod:`kubecore.schema`; the orchestrator composes these into its scenario;
- :mod:`loadgen.workloads`: workload templates -> manifests (Jobs, bare Pods, Deployments; for batch
  workloads also Workload/PodGroup, suspended Kueue Jobs, Volcano Jobs and PodGroups);
- :mod:`loadgen.shapes`: the Locust shape that follows the arrival curve;
- :mod:`loadgen.latency`: scheduling/start/completion latencies as Locust request events;
- ``loadgen/locustfile.py``: the Locust users.

Layering: imports only :mod:`kubecore` of the project (never ``hollowscale``, ``hollow`` or ``distill``).
"""
