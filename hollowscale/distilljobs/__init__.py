"""Real distillation jobs in a run (a scenario's ``distill_jobs``): teachers and a student as real pods
on the local cluster's real nodes, beside the hollow load.  One room, one job per module:

- :mod:`.prepare`: before the load: the distill image on the real nodes, the teacher checkpoint, the
  jobs' namespace, the rendered objects;
- :mod:`.manifests`: ``deploy/distill`` rendered per job (pure);
- :mod:`.jobs`: the objects created, followed (a monitor thread), faulted (``teacher-kill``,
  ``teacher-scale``) and deleted;
- :mod:`.figures`: each job's figures from the API's documents and the student's log (pure);
- :mod:`.report`: the jobs' section of ``summary.md`` and ``report.html``;
- :mod:`.feature`: the room as the run composes it (its part of each phase).

Two pieces live elsewhere, each because of the floor it must be on: the job's spec
(:class:`hollowscale.scenario.distill.DistillJobSpec`) with the scenario model that composes it, and
the distill image (:mod:`hollowscale.images.distill_image`) with the other images (the agent image is
built from its Python environment).
"""
