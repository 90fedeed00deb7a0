"""Stage selection and timing, with explicit clock values (no sleeps)."""

from __future__ import annotations

import math

import pytest

from hollow.stages import (
    EXIT_CODE,
    RUN_DURATION,
    STARTUP_DELAY,
    LifecycleSpec,
    annotation_problems,
    exit_code,
    plan,
    pod_facts,
    run_duration,
    select,
    startup_delay,
)
from kubecore.distributions import DurationDist

T0 = 1_700_000_000.0  # a wall time on a whole second


def pod(phase: str = "Pending", policy: str = "Never", annotations: dict | None = None, deleting: bool = False,
        started: str | None = None, restarts: int = 0, uid: str = "uid-1") -> dict:
    obj: dict = {
        "metadata": {"uid": uid, "name": "p", "namespace": "ns", "annotations": annotations or {},
                     "creationTimestamp": "2023-11-14T22:13:10Z"},
        "spec": {"nodeName": "n-0", "restartPolicy": policy, "containers": [{"name": "c", "image": "busybox"}]},
        "status": {"phase": phase, "conditions": [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2023-11-14T22:13:20Z"}]},
    }
    if deleting:
        obj["metadata"]["deletionTimestamp"] = "2023-11-14T22:14:00Z"
    if started:
        obj["status"]["containerStatuses"] = [{"name": "c", "restartCount": restarts,
                                               "state": {"running": {"startedAt": started}}}]
    return obj


def test_annotations_use_the_go_duration_grammar() -> None:
    lc = LifecycleSpec(startup_delay=DurationDist.fixed(7.0), run_duration=DurationDist.fixed(9.0))
    for text, seconds in (("90s", 90), ("1m30s", 90), ("1h2m3.5s", 3723.5), ("250ms", 0.25), ("0", 0)):
        assert startup_delay(pod_facts(pod(annotations={STARTUP_DELAY: text})), lc) == pytest.approx(seconds)
    assert math.isinf(run_duration(pod_facts(pod("Running", annotations={RUN_DURATION: "forever"})), lc))
    for bad in ("", "10", "-1s", "1x", "s", "1s2"):
        f = pod_facts(pod(annotations={STARTUP_DELAY: bad}))
        assert startup_delay(f, lc) == 7.0  # the pool default applies
        assert "Go duration" in annotation_problems(f)[0] or "non-negative" in annotation_problems(f)[0]
    # startup delays end: forever is refused there (and reported), the pool default applies
    f = pod_facts(pod(annotations={STARTUP_DELAY: "forever"}))
    assert startup_delay(f, lc) == 7.0 and "finite" in annotation_problems(f)[0]


def test_facts_extracted_from_pod_json() -> None:
    f = pod_facts(pod("Running", started="2023-11-14T22:13:25Z", restarts=2))
    assert f.node == "n-0" and f.restart_policy == "Never" and f.phase == "Running"
    assert f.bound_at == T0 + 0  # 22:13:20Z
    assert f.run_started_at == T0 + 5 and f.restart_count == 2
    assert f.containers == (("c", "busybox"),)
    assert f.has_scheduled_condition


def test_bare_pod_is_bound_at_creation() -> None:
    obj = pod()
    obj["status"] = {}
    f = pod_facts(obj)
    assert f.bound_at == T0 - 10 and not f.has_scheduled_condition and f.phase == ""


def test_stage_selection_table() -> None:
    assert select(pod_facts(pod("Pending"))).name == "pod-ready"
    assert select(pod_facts(pod("Running", "Never"))).name == "pod-complete"
    assert select(pod_facts(pod("Running", "OnFailure"))).name == "pod-complete"
    assert select(pod_facts(pod("Running", "Always"))) is None  # Always stays Running
    assert select(pod_facts(pod("Succeeded"))) is None
    assert select(pod_facts(pod("Running", "Always", deleting=True))).name == "pod-delete"
    assert select(pod_facts(pod("Failed", deleting=True))).name == "pod-delete"


def test_startup_delay_counts_from_binding_not_from_now() -> None:
    lc = LifecycleSpec(startup_delay=DurationDist("fixed", 5.0))
    f = pod_facts(pod())
    p = plan(f, lc, now_wall=T0 + 1)
    assert p is not None and p.stage.name == "pod-ready" and p.due_wall == T0 + 5
    # an agent that restarts later computes the same deadline
    assert plan(f, lc, now_wall=T0 + 3).due_wall == T0 + 5
    # and a deadline in the past is due now, not in the past
    assert plan(f, lc, now_wall=T0 + 9).due_wall == T0 + 9


def test_annotations_override_pool_defaults() -> None:
    lc = LifecycleSpec(startup_delay=DurationDist("fixed", 5.0), run_duration=DurationDist("fixed", 60.0),
                       exit_code=0)
    f = pod_facts(pod(annotations={STARTUP_DELAY: "2s", RUN_DURATION: "1m30s", EXIT_CODE: "3"}))
    assert startup_delay(f, lc) == 2.0 and run_duration(f, lc) == 90.0 and exit_code(f, lc) == 3
    assert plan(f, lc, now_wall=T0).due_wall == T0 + 2
    running = pod_facts(pod("Running", annotations={RUN_DURATION: "1m30s"}, started="2023-11-14T22:13:25Z"))
    assert plan(running, lc, now_wall=T0 + 10).due_wall == T0 + 5 + 90
    # a more precise start recorded by the agent itself wins over the second-resolution timestamp
    assert plan(running, lc, now_wall=T0 + 10, run_started_at=T0 + 5.6).due_wall == pytest.approx(T0 + 95.6)


def test_forever_and_always_never_finish() -> None:
    lc = LifecycleSpec(run_duration=DurationDist("fixed", 10.0))
    assert plan(pod_facts(pod("Running", annotations={RUN_DURATION: "forever"})), lc, T0) is None
    assert plan(pod_facts(pod("Running", "Always")), lc, T0) is None
    assert plan(pod_facts(pod("Running")), LifecycleSpec(), T0) is None  # pool default is forever


def test_bad_annotations_fall_back_to_defaults_and_are_reported() -> None:
    lc = LifecycleSpec(startup_delay=DurationDist("fixed", 4.0), exit_code=0)
    f = pod_facts(pod(annotations={STARTUP_DELAY: "soon", EXIT_CODE: "x"}))
    assert startup_delay(f, lc) == 4.0 and exit_code(f, lc) == 0
    problems = annotation_problems(f)
    assert len(problems) == 2 and "ns/p" in problems[0]


def test_distribution_draws_are_keyed_by_uid_and_restart() -> None:
    lc = LifecycleSpec(run_duration=DurationDist("uniform", minimum=50.0, maximum=70.0))
    a = run_duration(pod_facts(pod("Running", uid="a")), lc)
    assert a == run_duration(pod_facts(pod("Running", uid="a")), lc)  # stable across "restarts" of the agent
    values = {run_duration(pod_facts(pod("Running", uid=f"u{i}")), lc) for i in range(200)}
    assert len(values) > 150 and min(values) >= 50 and max(values) <= 70
    r0 = run_duration(pod_facts(pod("Running", uid="a", started="2023-11-14T22:13:25Z", restarts=0)), lc)
    r1 = run_duration(pod_facts(pod("Running", uid="a", started="2023-11-14T22:13:25Z", restarts=1)), lc)
    assert r0 != r1  # each container restart runs for a fresh draw


def test_distributions_respect_bounds() -> None:
    import random

    rng = random.Random(1)
    for dist in (DurationDist("normal", 10, 5, 2, 12), DurationDist("exponential", 10, 0, 1, 30),
                 DurationDist("lognormal", 10, 1.0, 0, 100)):
        xs = [dist.sample(rng) for _ in range(2000)]
        assert min(xs) >= dist.minimum and max(xs) <= dist.maximum
    xs = [DurationDist("exponential", 10).sample(rng) for _ in range(5000)]
    assert 9 < sum(xs) / len(xs) < 11


def test_failure_fraction_fails_about_that_share() -> None:
    lc = LifecycleSpec(exit_code=0, failure_fraction=0.2, failure_exit_code=137)
    codes = [exit_code(pod_facts(pod(uid=f"u{i}")), lc) for i in range(2000)]
    share = codes.count(137) / len(codes)
    assert 0.17 < share < 0.23 and set(codes) == {0, 137}
