"""The run orchestrator (``hollowscale run``), in rooms of one job each.

- :mod:`.orchestrator`: the phases of a run, in order, and teardown (:class:`~.orchestrator.Runner`);
- :mod:`.features`: the optional features a run composes and the hooks they take part in;
- :mod:`.faults`: each fault fired at its time by the handler of its type; :mod:`.schedule` the load's timers;
- :mod:`.times`: the moments a run's figures are cut by;
- :mod:`.loadwatch`: a load that fails wholesale stops the run as incomplete;
- :mod:`.resources`: CPU and memory of the run's own processes;
- :mod:`.summary`: what was observed -> ``summary.json`` (the one place it is assembled);
- :mod:`.variants`: one scenario under several variants, each on a fresh cluster;
- :mod:`.progress`: the live progress line; :mod:`.cli`: ``run``, ``validate``, ``compare``.

The cluster a run uses is :mod:`hollowscale.backends`, where its agents run :mod:`hollowscale.placements`
(see ``docs/architecture.md``).  Nothing is imported here, so the CLI can mount these commands without
loading the runner.
"""
