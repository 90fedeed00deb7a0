"""``agents.placement: in-cluster``: the agents, Locust and Prometheus as pods of ``deploy/hollowscale``.

- :mod:`.deployment`: images, least-privilege credentials, the pods Ready, their end;
- :mod:`.render`: ``deploy/hollowscale`` rendered for one run (kustomize);
- :mod:`.objects`: the ledger of what the run created, deleted by uid;
- :mod:`.pods`: the run's pods: Ready, why not starting, logs;
- :mod:`.locustweb`: the Locust master's web API;
- :mod:`.placement`: the placement (:class:`~.placement.InClusterPlacement`) and the run's views of its
  agents, Prometheus and Locust.
"""
