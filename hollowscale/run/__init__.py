"""The run orchestrator (``hollowscale run``), in rooms of one job each.

- :mod:`.orchestrator`: the phases of a run, in order, and teardown;
- :mod:`.agents`: node-ownership check, the hollow agents, the Ready barrier;
- :mod:`.loadwatch`: a load that fails wholesale stops the run as incomplete;
- :mod:`.resources`: CPU and memory of the run's own processes;
- :mod:`.summary`: what was observed -> ``summary.json``;
- :mod:`.children`: child processes and the pid registry;
- :mod:`.progress`: the live progress line; :mod:`.cli`: ``run``, ``validate``, ``compare``.

Nothing is imported here, so the CLI can mount these commands without loading the runner.
"""
