"""``agents.placement: process``: the agents, Locust and Prometheus as processes beside the harness.

- :mod:`.agents`: one hollow agent process per shard, restarted with the kubelet's backoff;
- :mod:`.locust`: a headless Locust;
- :mod:`.placement`: the placement (:class:`~.placement.ProcessPlacement`); its Prometheus is
  :class:`hollowscale.measure.prom.PrometheusServer`.
"""
