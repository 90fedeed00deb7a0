"""hollowscale: scale-testing harness for Kubernetes schedulers.

The orchestrator package: CLI, cluster backends, scenario runner, measurements and reports.
The engines (:mod:`hollow`, :mod:`loadgen`, :mod:`distill`) never import this package, except the
leaf :mod:`hollowscale.kube`, which imports nothing else of the project.
"""

__version__ = "0.1.0"
