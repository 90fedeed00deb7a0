"""Training jobs through failures: attempts, lost work, ETTR and per-fault recovery on hand-built timelines.

Times are seconds after ``T0`` (epoch ms); each expected figure is worked out in the comment beside it.
"""

from __future__ import annotations

from typing import Any

import pytest

from hollowscale.measure.timeline import PodRecord
from hollowscale.training.recovery import Attempt, attempts_of, lost_work, member_runs, training_recovery

T0 = 1_700_000_000_000.0


def s(seconds: float) -> float:
    return T0 + seconds * 1000.0


def pod(uid: str, *, created: float, sched: float | None = None, run: float | None = None, fin: float | None = None,
        deleted: float | None = None, phase: str = "", inst: str = "train-1", n: int | None = 4, gpus: float = 8.0,
        node: str = "", workload: str = "train", ns: str = "team-a") -> PodRecord:
    """A member pod; times in seconds after T0; phase Succeeded when it finished, unless told."""
    if not phase:
        phase = "Succeeded" if fin is not None else ("Running" if run is not None else "Pending")
    return PodRecord(uid=uid, name=uid, workload=workload, role="worker", instance=inst, owner_kind="Job",
                     owner_uid=f"job-{inst}", gpus=gpus, created_ms=s(created),
                     scheduled_ms=None if sched is None else s(sched), running_ms=None if run is None else s(run),
                     finished_ms=None if fin is None else s(fin), deleted_ms=None if deleted is None else s(deleted),
                     node=node or f"node-{uid}", phase=phase, exit_code=137 if phase == "Failed" else None,
                     namespace=ns, gang=inst if n is not None else "", gang_min=n)


def fault(t: float, kind: str = "pod-failures", *, pods: list[str] | None = None,
          nodes: list[str] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"t_ms": s(t), "type": kind}
    if pods is not None:
        out["pods"] = pods
    if nodes is not None:
        out["nodes"] = nodes
    return out


def recreate_timeline(replacements_run: bool = True) -> list[PodRecord]:
    """JobSet Recreate: a0 fails at 100 s, the other 3 are deleted at 102 s, 4 new pods created at 103 s."""
    first = [pod("a0", created=1, sched=5, run=10, fin=100, phase="Failed")]
    first += [pod(f"a{i}", created=1, sched=5, run=10, deleted=102) for i in (1, 2, 3)]
    if replacements_run:
        second = [pod(f"b{i}", created=103, sched=105, run=110, fin=200) for i in range(4)]
    else:  # bound, never running (the window ends first)
        second = [pod(f"b{i}", created=103, sched=105) for i in range(4)]
    return first + second


def per_index_timeline() -> list[PodRecord]:
    """Only the failed pod is replaced: r0 created at 101 s, runs at 112 s; everyone Succeeds at 220 s."""
    return [pod("a0", created=1, sched=5, run=10, fin=100, phase="Failed"),
            *(pod(f"a{i}", created=1, sched=5, run=10, fin=220) for i in (1, 2, 3)),
            pod("r0", created=101, sched=104, run=112, fin=220)]


# --- 1. a gang recreated after one member fails --------------------------------------------------------
def test_recreated_gang_restarts_from_its_last_checkpoint() -> None:
    out = training_recovery(recreate_timeline(), [fault(100, pods=["a0"])], {"train": 60.0}, s(300))
    [row] = out["faults"]
    assert row["fault"] == 0 and row["type"] == "pod-failures" and row["instance"] == "train-1"
    assert row["workload"] == "train" and row["t_ms"] == s(100)
    assert row["broke_after_s"] == 0.0  # the gang dropped to 3 running members at the fault's own ms
    assert row["reaction_s"] == 3.0  # b0..b3 created at 103 s
    assert row["recovered_s"] == 10.0 and row["recovered"] is True  # all 4 new pods run at 110 s
    assert row["lost_work_s"] == 30.0  # attempt [10, 100): 90 s, checkpoints at 60 s: 90 mod 60
    # GPUs held while incomplete, [100, 110): a1..a3 until 102 s: 2 s x 8 x 3 = 48; b0..b3 from 105 s: 5 x 8 x 4 = 160
    assert row["incomplete_gpu_s"] == 208.0
    assert row["wasted_gpu_s"] == 1168.0  # 208 + 30 s x 4 members x 8 GPUs (960)

    [job] = out["jobs"]
    assert job["members"] == 4 and job["gpus_per_member"] == 8.0
    assert job["attempts"] == 2 and job["ended"] == ["broken", "completed"] and job["restarts"] == 1
    assert job["whole_s"] == 180.0  # [10, 100) and [110, 200)
    assert job["lost_work_s"] == 30.0
    assert job["productive_gpu_s"] == 4800.0  # (60 + 90) s x 32 GPUs
    # held: a0 [5, 100) 95 x 8 = 760; a1..a3 [5, 102) 97 x 8 x 3 = 2328; b0..b3 [105, 200) 95 x 8 x 4 = 3040
    assert job["held_gpu_s"] == 6128.0
    assert job["ettr"] == 0.7833  # 4800 / 6128 = 0.78329

    summary = out["summary"]
    assert summary["faults_fired"] == 1 and summary["faults_hitting_jobs"] == 1
    assert summary["reaction_s"] == {"p50": 3.0, "p99": 3.0, "max": 3.0, "count": 1}
    assert summary["recovered_s"] == {"p50": 10.0, "p99": 10.0, "max": 10.0, "count": 1}
    assert summary["unrecovered"] == 0 and summary["restarts"] == 1
    assert summary["wasted_gpu_hours"] == 0.3244  # 1168 / 3600
    assert summary["lost_work_gpu_hours"] == 0.2667  # 960 / 3600
    assert summary["ettr"] == 0.7833
    assert summary["productive_gpu_hours"] == 1.3333 and summary["held_gpu_hours"] == 1.7022  # 4800, 6128 / 3600


def test_the_helpers_recompute_the_attempts() -> None:
    pods = recreate_timeline()
    assert attempts_of(member_runs(pods), 4, s(300)) == [Attempt(s(10), s(100), "broken"),
                                                          Attempt(s(110), s(200), "completed")]


# --- 2. per-index replacement ------------------------------------------------------------------------------
def test_per_index_replacement_recovers_when_the_replacement_runs() -> None:
    out = training_recovery(per_index_timeline(), [fault(100, pods=["a0"])], {"train": 60.0}, s(300))
    [row] = out["faults"]
    assert row["broke_after_s"] == 0.0 and row["reaction_s"] == 1.0  # r0 created at 101 s
    assert row["recovered_s"] == 12.0  # r0 runs at 112 s: 4 running again
    assert row["lost_work_s"] == 30.0  # 90 mod 60
    # [100, 112): a1..a3 keep holding 12 s x 8 x 3 = 288; r0 from 104 s: 8 s x 8 = 64
    assert row["incomplete_gpu_s"] == 352.0
    assert row["wasted_gpu_s"] == 1312.0  # 352 + 960
    [job] = out["jobs"]
    assert job["ended"] == ["broken", "completed"] and job["restarts"] == 1
    assert job["productive_gpu_s"] == 5376.0  # (60 + 108) s x 32
    assert job["held_gpu_s"] == 6848.0  # a0 95 x 8 = 760; a1..a3 215 x 8 x 3 = 5160; r0 116 x 8 = 928
    assert job["ettr"] == 0.785  # 5376 / 6848 = 0.78505


# --- 3. no checkpoints ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("checkpoints", [{}, {"train": None}])
def test_without_checkpoints_the_whole_attempt_is_lost(checkpoints: dict[str, float | None]) -> None:
    out = training_recovery(recreate_timeline(), [fault(100, pods=["a0"])], checkpoints, s(300))
    [row] = out["faults"]
    assert row["lost_work_s"] == 90.0
    assert row["wasted_gpu_s"] == 3088.0  # 208 + 90 x 32
    [job] = out["jobs"]
    assert job["productive_gpu_s"] == 2880.0  # only the completed 90 s: 90 x 32
    assert job["ettr"] == 0.47  # 2880 / 6128 = 0.46997
    assert out["summary"]["lost_work_gpu_hours"] == 0.8  # 2880 / 3600


# --- 4. unrecovered, and faults the job rides through ---------------------------------------------------
def test_a_fault_not_recovered_by_the_window_end() -> None:
    out = training_recovery(recreate_timeline(replacements_run=False), [fault(100, pods=["a0"])],
                            {"train": 60.0}, s(150))
    [row] = out["faults"]
    assert row["recovered"] is False and row["recovered_s"] is None
    assert row["broke_after_s"] == 0.0 and row["reaction_s"] == 3.0
    # [100, 150): a1..a3 until 102 s: 48; b0..b3 bound from 105 s: 45 x 8 x 4 = 1440
    assert row["incomplete_gpu_s"] == 1488.0
    assert row["wasted_gpu_s"] == 2448.0  # 1488 + 960
    [job] = out["jobs"]
    assert job["ended"] == ["broken"] and job["restarts"] == 0
    assert job["held_gpu_s"] == 4528.0  # 760 + 2328 + 1440
    assert out["summary"]["unrecovered"] == 1
    assert out["summary"]["recovered_s"] == {"p50": None, "p99": None, "max": None, "count": 0}


def test_an_open_attempt_loses_nothing_and_a_surviving_gang_is_not_broken() -> None:
    # N = 3 of 4 members: losing one leaves the gang whole; the window ends while it still runs
    pods = [pod("a0", created=0, sched=0, run=10, fin=50, phase="Failed", n=3),
            *(pod(f"a{i}", created=0, sched=0, run=10, n=3) for i in (1, 2, 3))]
    out = training_recovery(pods, [fault(50, pods=["a0"])], {"train": 60.0}, s(100))
    [row] = out["faults"]
    assert row["broke_after_s"] is None and row["recovered_s"] is None and row["recovered"] is None
    assert row["lost_work_s"] == 0.0 and row["wasted_gpu_s"] == 0.0 and row["reaction_s"] is None
    [job] = out["jobs"]
    assert job["ended"] == ["open"] and job["lost_work_s"] == 0.0 and job["whole_s"] == 90.0
    assert job["productive_gpu_s"] == 2160.0  # 90 s x 3 members x 8 GPUs
    assert job["held_gpu_s"] == 2800.0  # a0 50 x 8 = 400; a1..a3 100 x 8 x 3 = 2400
    assert out["summary"]["unrecovered"] == 0 and out["summary"]["ettr"] == 0.7714  # 2160 / 2800


def test_a_fault_while_the_gang_is_already_down_reports_recovery_but_no_cost() -> None:
    faults = [fault(100, pods=["a0"]), fault(105, pods=["a1"])]  # at 105 s a1 runs, the gang waits for r0
    out = training_recovery(per_index_timeline(), faults, {"train": 60.0}, s(300))
    first, second = out["faults"]
    assert first["wasted_gpu_s"] == 1312.0
    assert second["broke_after_s"] is None and second["recovered_s"] == 7.0 and second["recovered"] is True
    assert second["reaction_s"] is None  # no member created after 105 s
    assert second["wasted_gpu_s"] == 0.0 and second["lost_work_s"] == 0.0
    assert out["summary"]["wasted_gpu_hours"] == 0.3644  # 1312 / 3600


def test_two_faults_in_one_attempt_charge_its_break_once_to_the_earlier() -> None:
    faults = [fault(100, pods=["a0"]), fault(60, "node-drain", nodes=["node-a2"])]  # listed out of time order
    out = training_recovery(recreate_timeline(), faults, {"train": 60.0}, s(300))
    late, early = out["faults"]  # rows in fault order
    assert (late["fault"], early["fault"]) == (0, 1)
    assert early["broke_after_s"] == 40.0 and early["recovered_s"] == 50.0 and early["wasted_gpu_s"] == 1168.0
    assert late["broke_after_s"] == 0.0 and late["recovered_s"] == 10.0
    assert late["lost_work_s"] == 0.0 and late["incomplete_gpu_s"] == 0.0 and late["wasted_gpu_s"] == 0.0
    assert out["summary"]["wasted_gpu_hours"] == 0.3244


# --- 5. what a fault hits --------------------------------------------------------------------------------------
def test_faults_hit_by_node_and_only_training_gangs() -> None:
    pods = [pod("w1", created=0, sched=0, run=10, n=2, gpus=4, node="n1"),
            pod("w2", created=0, sched=0, run=10, deleted=130, phase="Failed", n=2, gpus=4, node="n2"),
            pod("w3", created=131, sched=132, run=140, n=2, gpus=4, node="n3"),
            pod("svc", created=0, sched=0, run=1, n=None, inst="svc", node="n2")]  # no gang_min: not a job
    faults = [fault(100, "node-lost", nodes=["n2"]), fault(150, "node-lost", nodes=["n9"]), fault(150, pods=["svc"])]
    out = training_recovery(pods, faults, {"train": 30.0}, s(200))
    [row] = out["faults"]
    assert row["fault"] == 0 and row["type"] == "node-lost"
    assert row["broke_after_s"] == 30.0  # w2 deleted at 130 s
    assert row["reaction_s"] == 31.0 and row["recovered_s"] == 40.0
    assert row["lost_work_s"] == 0.0  # [10, 130) is 120 s: a checkpoint just taken
    assert row["incomplete_gpu_s"] == 72.0  # [130, 140): w1 10 x 4 = 40; w3 from 132 s: 8 x 4 = 32
    assert [j["instance"] for j in out["jobs"]] == ["train-1"]
    assert out["jobs"][0]["ended"] == ["broken", "open"]
    assert out["summary"]["faults_fired"] == 3 and out["summary"]["faults_hitting_jobs"] == 1


def test_a_pod_that_ended_before_the_fault_is_not_hit() -> None:
    out = training_recovery(recreate_timeline(), [fault(101, pods=["a0"])], {"train": 60.0}, s(300))
    assert out["faults"] == []


def test_one_fault_hitting_several_jobs_gives_rows_by_instance_and_nearest_rank_percentiles() -> None:
    pods: list[PodRecord] = []
    for k, inst in enumerate(["job-c", "job-a", "job-b"]):
        pods += [pod(f"{inst}-0", created=0, sched=0, run=10, fin=50, phase="Failed", inst=inst, n=2, node="n1"),
                 pod(f"{inst}-1", created=0, sched=0, run=10, inst=inst, n=2, node=f"m{k}"),
                 pod(f"{inst}-2", created=51 + k, sched=60, run=70, inst=inst, n=2, node=f"m{k}")]
    out = training_recovery(pods, [fault(50, "node-lost", nodes=["n1"])], {}, s(100))
    assert [r["instance"] for r in out["faults"]] == ["job-a", "job-b", "job-c"]
    assert [r["reaction_s"] for r in out["faults"]] == [2.0, 3.0, 1.0]
    # nearest rank over [1, 2, 3]: p50 index ceil(1.5) - 1 = 1, p99 index ceil(2.97) - 1 = 2
    assert out["summary"]["reaction_s"] == {"p50": 2.0, "p99": 3.0, "max": 3.0, "count": 3}
    assert out["summary"]["restarts"] == 3


def test_instances_are_per_namespace() -> None:
    pods = [pod("x0", created=0, sched=0, run=10, n=1, ns="team-a"),
            pod("y0", created=0, sched=0, run=20, n=1, ns="team-b")]
    jobs = training_recovery(pods, [], {}, s(100))["jobs"]
    assert [(j["namespace"], j["whole_s"]) for j in jobs] == [("team-a", 90.0), ("team-b", 80.0)]


# --- 6. the sweep's order at equal times ------------------------------------------------------------------------
def test_an_end_and_a_start_at_the_same_ms_never_make_the_gang_whole() -> None:
    end = 1000.0
    assert attempts_of([(0.0, 100.0, False), (100.0, None, False)], 2, end) == []
    # whole, then one member replaced at the very ms it failed: a break and a new attempt at once
    runs = [(0.0, None, False), (0.0, 100.0, False), (100.0, None, False)]
    assert attempts_of(runs, 2, end) == [Attempt(0.0, 100.0, "broken"), Attempt(100.0, end, "open")]


def test_the_sweep_edges() -> None:
    end = 1000.0
    assert attempts_of([(50.0, 50.0, False), (0.0, None, False)], 2, end) == []  # ran for no time: not counted
    assert attempts_of([(0.0, 100.0, True), (0.0, 100.0, False)], 2, end) == [Attempt(0.0, 100.0, "completed")]
    assert attempts_of([(0.0, 2000.0, False), (end, None, False)], 1, end) == [Attempt(0.0, end, "open")]
    assert attempts_of([(0.0, end, True)], 1, end) == [Attempt(0.0, end, "completed")]
    # a completed gang is done: members running again later start no attempt
    assert attempts_of([(0.0, 100.0, True), (200.0, None, False)], 1, end) == [Attempt(0.0, 100.0, "completed")]
    with pytest.raises(ValueError):
        attempts_of([], 0, end)


# --- 7. lost work ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("length", "checkpoint", "lost"), [
    (90.0, 60.0, 30.0), (120.0, 60.0, 0.0), (0.0, 60.0, 0.0), (59.5, 60.0, 59.5), (90.0, None, 90.0),
    (90.0, 0.0, 90.0), (0.3, 0.1, 0.0)])
def test_lost_work(length: float, checkpoint: float | None, lost: float) -> None:
    assert lost_work(length, checkpoint) == pytest.approx(lost)
