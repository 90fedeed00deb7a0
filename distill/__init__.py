"""distill: knowledge distillation as a service (EDL style), runnable alone.

Modules, one job each: ``data`` (Fashion-MNIST, split, batch stream), ``models`` (networks,
loss, checkpoints), ``train_teacher``, ``wire`` (teacher wire format), ``teacher`` (HTTP
service), ``discovery`` (static list / EndpointSlices), ``reader`` (prefetching,
work-stealing, fault-tolerant client), ``student`` (trainer), ``procs`` (teacher
subprocesses, CPU layout), ``bench``, ``cli``.

Layering: imports nothing from ``hollow``, ``loadgen`` or ``hollowscale``.
"""
