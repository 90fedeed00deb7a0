"""hollowscale: scale-testing harness for Kubernetes schedulers.

The orchestrator package: CLI, cluster backends, scenario runner, measurements and reports.
It imports the engines (:mod:`hollow`, :mod:`loadgen`, :mod:`distill`) and the ground floor
(:mod:`kubecore`); neither ever imports this package, and its own sub-packages keep floors of their
own (``tests/unit/test_layers.py``).  The map of it all is ``docs/architecture.md``.
"""

__version__ = "0.1.0"
