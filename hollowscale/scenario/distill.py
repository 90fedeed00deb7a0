"""Real distillation jobs in a scenario: a student Job and its teacher Deployment on the real nodes.

A ``distill_jobs`` entry is one EDL-style job (see :mod:`distill`): ``teachers`` replicas of the
teacher inference service behind a Service, and one student that finds them through the Service's
EndpointSlices and trains a small net on Fashion-MNIST with their soft labels.  Both run as real
pods on the cluster's real nodes (``cluster.real_nodes``), beside the hollow nodes' load, so one
report holds the scheduler's figures and the training's.

The training settings default to the standalone bench's (``hollowscale distill bench``: 2 epochs,
2,000 labelled and 30,000 unlabelled images), so the run's accuracy can be held against the bench's
for the same seed.
"""

from __future__ import annotations

from pydantic import StrictBool, StrictInt

from kubecore.schema import DnsLabel, Quantity, Seconds, Spec, number, one_of

#: faults aimed at a distillation job's teachers (``job`` names it)
DISTILL_FAULTS = ("teacher-kill", "teacher-scale")


class DistillGpus(Spec):
    """The GPUs a job's pods get on the real nodes (``cluster.real_node_gpus``); how they ask follows from how
    the nodes offer them: ``nvidia.com/gpu: 1`` when counted, ResourceClaims when DRA.

    Attributes:
        teachers: ``whole`` (a GPU each), ``shared`` (every teacher on one shared ResourceClaim: one GPU,
            time-sliced) or ``memory`` (each teacher a ``teacher_memory`` share of a GPU: consumable capacity).
        teacher_memory: a teacher's memory share (with ``teachers: memory``).
        student: the student gets a whole GPU.
    """

    teachers: one_of("whole", "shared", "memory") = "whole"  # type: ignore[valid-type]
    teacher_memory: Quantity = "10Gi"
    student: StrictBool = True


class DistillJobSpec(Spec):
    """One distillation job.

    Attributes:
        name: the job's name (its objects are ``distill-teacher-<name>`` and ``distill-student-<name>``).
        seed: the student's seed (data order, init, augmentation).
        teachers: teacher replicas at the start; ``teacher-scale`` faults change it during the run.
        epochs, labelled, unlabelled: the student's training settings (the bench's by default).
        test_images: evaluate on the first N test images (None: all 10,000, as the bench does).
        threads: torch threads of the student and of each teacher.
        start_at_s: when the student is created, in seconds after the load starts (the teachers are
            started and Ready before the load).
        timeout_s: how long the run waits for the student to finish after it was created.
        gpus: GPUs for the teachers and the student (:class:`DistillGpus`); None: none, as before.
    """

    name: DnsLabel
    seed: StrictInt = 0
    teachers: number(1, 8, integer=True) = 2  # type: ignore[valid-type]
    epochs: number(1, 50, integer=True) = 2  # type: ignore[valid-type]
    labelled: number(10, 60000, integer=True) = 2000  # type: ignore[valid-type]
    unlabelled: number(10, 60000, integer=True) = 30000  # type: ignore[valid-type]
    test_images: number(100, 10000, integer=True) | None = None  # type: ignore[valid-type]
    threads: number(1, 64, integer=True) = 1  # type: ignore[valid-type]
    start_at_s: Seconds = 0.0
    timeout_s: Seconds = 900.0
    gpus: DistillGpus | None = None

    def student_args(self) -> list[str]:
        """The student's training flags (``python -m distill.student``), as the bench passes them."""
        args = ["--seed", str(self.seed), "--epochs", str(self.epochs), "--labelled", str(self.labelled),
                "--unlabelled", str(self.unlabelled), "--threads", str(self.threads)]
        if self.test_images is not None:
            args += ["--test-images", str(self.test_images)]
        return args
