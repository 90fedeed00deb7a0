"""GPUs on the local cluster's real nodes (``cluster.real_node_gpus``), and whether the distillation jobs'
GPUs fit them.

The same words as a hollow pool's ``gpus:`` (:class:`hollow.dra.GpuSpec`: ``expose``, ``model``,
``sharing``, ``partitions``, checked by it), plus how many each real node has.  ``expose: counted`` runs the
fake device plugin (``nvidia.com/gpu``), ``expose: dra`` the DRA kubelet plugin (ResourceSlice devices, pods
ask by claim); not ``both``: a real node's one set of fake GPUs is offered one way.  Without this section the
real nodes have no GPUs, as before.
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import StrictStr, ValidationError, model_validator

from hollow.dra import GPU_MODELS, SHARING, GpuSpec, memory_bytes
from hollowscale.scenario.distill import DistillJobSpec
from kubecore.schema import Spec, field_errors, number, one_of, raise_problems

Problems = list[tuple[tuple[str | int, ...], str]]


class RealNodeGpus(Spec):
    """Each real node's fake GPUs.

    Attributes:
        count: GPUs per real node.
        expose: ``counted`` (the device plugin: ``nvidia.com/gpu``) or ``dra`` (the DRA plugin: devices of
            driver ``gpu.nvidia.com``, DeviceClass ``gpu.nvidia.com``).
        model, sharing, partitions: as a hollow pool's ``gpus:`` (:class:`hollow.dra.GpuSpec` checks them;
            sharing and partitions with ``expose: dra`` only).
    """

    count: number(1, 64, integer=True) = 1  # type: ignore[valid-type]
    expose: one_of("counted", "dra") = "counted"  # type: ignore[valid-type]
    model: one_of(*GPU_MODELS) = "h100-80gb"  # type: ignore[valid-type]
    sharing: one_of(*SHARING) = "none"  # type: ignore[valid-type]
    partitions: tuple[StrictStr, ...] = ()

    @model_validator(mode="after")
    def _as_a_pool_would(self) -> RealNodeGpus:
        try:
            self.gpu_spec()
        except ValidationError as exc:
            raise_problems("RealNodeGpus", [((e.path,), e.message) for e in field_errors(exc, GpuSpec)])
        return self

    def gpu_spec(self) -> GpuSpec:
        """The pool-style spec of these GPUs (what the DRA plugin and the device classes take)."""
        return GpuSpec.model_validate({"expose": self.expose, "model": self.model, "sharing": self.sharing,
                                       "partitions": list(self.partitions)})


def _gpus_needed(job: DistillJobSpec, gpu_memory: int) -> int:
    """GPUs one job holds at once (teachers at their starting replicas, and its student)."""
    g = job.gpus
    if g is None:
        return 0
    if g.teachers == "whole":
        teachers = job.teachers
    elif g.teachers == "shared":
        teachers = 1
    else:
        per_gpu = max(1, gpu_memory // memory_bytes(g.teacher_memory))
        teachers = math.ceil(job.teachers / per_gpu)
    return teachers + (1 if g.student else 0)


def distill_gpu_problems(jobs: tuple[DistillJobSpec, ...], gpus: RealNodeGpus | None, real_nodes: int) -> Problems:
    """What the jobs' ``gpus`` ask that the real nodes' GPUs cannot give (at validate, not half-way through)."""
    problems: Problems = []
    asking = [(i, j) for i, j in enumerate(jobs) if j.gpus is not None]
    if not asking:
        return problems
    if gpus is None:
        for i, _ in asking:
            problems.append((("distill_jobs", i, "gpus"), "the real nodes have no GPUs: set cluster.real_node_gpus "
                             "(count, expose: dra for claims)"))
        return problems
    gpu_memory = GPU_MODELS[gpus.model].memory_mib * 2**20
    for i, job in asking:
        g: Any = job.gpus
        if g.teachers != "whole" and gpus.expose != "dra":
            problems.append((("distill_jobs", i, "gpus", "teachers"), f"{g.teachers!r} teachers share GPUs through "
                             "DRA claims: expected cluster.real_node_gpus.expose: dra"))
        if g.teachers == "memory":
            if gpus.sharing != "memory":
                problems.append((("distill_jobs", i, "gpus", "teachers"), "memory shares need GPUs that publish "
                                 "memory as consumable capacity: expected cluster.real_node_gpus.sharing: memory"))
            if memory_bytes(g.teacher_memory) > gpu_memory:
                problems.append((("distill_jobs", i, "gpus", "teacher_memory"), f"expected at most the "
                                 f"{gpus.model}'s memory ({GPU_MODELS[gpus.model].memory}), got {g.teacher_memory}"))
    needed = sum(_gpus_needed(j, gpu_memory) for _, j in asking)
    have = gpus.count * real_nodes
    if needed > have:
        problems.append((("distill_jobs",), f"the jobs hold {needed} GPU(s) at once (teachers and students), the "
                         f"real nodes have {have} (cluster.real_nodes x cluster.real_node_gpus.count)"))
    return problems


def real_node_gpu_problems(gpus: RealNodeGpus | None, real_nodes: int, backend: str) -> Problems:
    """``cluster.real_node_gpus`` without real nodes to put them on: the local cluster's real nodes, or kind's
    workers (counted GPUs only: the fake device plugin runs beside a kind cluster, the DRA plugin does not)."""
    if gpus is None:
        return []
    if backend not in ("local", "kind") or real_nodes < 1:
        return [(("cluster", "real_node_gpus"), "GPUs of real nodes hollowscale made: expected cluster.backend: "
                 f"local with cluster.real_nodes >= 1, or kind with workers, got {backend!r} with {real_nodes}")]
    if backend == "kind" and gpus.expose != "counted":
        return [(("cluster", "real_node_gpus", "expose"), "kind workers get counted GPUs (the fake device plugin); "
                 f"expected counted, got {gpus.expose!r} (DRA GPUs on real nodes: cluster.backend: local)")]
    return []
