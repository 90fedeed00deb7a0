"""The ground floor: what two or more of hollowscale's packages need, written once.

``kubecore`` imports nothing of the project, and every other package may import it; the engines
(:mod:`hollow`, :mod:`loadgen`, :mod:`distill`) import only this, and the orchestrator
(:mod:`hollowscale`) imports the engines.  Modules, each with one job:

- :mod:`kubecore.config`: kubeconfig / in-cluster config -> :class:`~kubecore.config.KubeEndpoint`
  (through the official client's loader: ``$KUBECONFIG`` lists, contexts, exec plugins);
- :mod:`kubecore.tls`: the TLS client context;
- :mod:`kubecore.watch`: an authenticated ``requests`` session and the synchronous list-then-watch;
- :mod:`kubecore.namespaces`: claim a namespace, release only what the run created;
- :mod:`kubecore.durations`: the Go duration grammar (parse and format);
- :mod:`kubecore.distributions`: the duration distribution type and its one YAML shape;
- :mod:`kubecore.quantity`: resource quantities as exact fractions;
- :mod:`kubecore.schema` and :mod:`kubecore.yamlfile`: the validation policy and strict YAML reading;
- :mod:`kubecore.promtext`: Prometheus text parsing (``prometheus_client``'s parser);
- :mod:`kubecore.procs`: child processes (own session, log, group stop, pid + start time).

Submodules are imported explicitly (``from kubecore.durations import ...``) so a program pays only
for what it uses.
"""
