"""Why gangs did not complete in the window (hollowscale/topology/throughput.py), one reason each, by hand.

The window ends at 1,000 s (epoch ms 1,000,000); each gang's run before any stretch is 100 s."""

from __future__ import annotations

import pytest

from hollowscale.topology.throughput import GangRun, reason_not_completed, throughput_decomposition

END = 1_000_000.0


def ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1000.0


def gang(created_s: float | None, running_s: float | None = None, completed_s: float | None = None,
         factor: float | None = 1.3, run_s: float | None = 100.0, key: str = "ns/g") -> GangRun:
    return GangRun(key, ms(created_s), ms(running_s), ms(completed_s), run_s, factor)


@pytest.mark.parametrize(("g", "reason"), [
    (gang(800, running_s=880), "spread"),  # 880 + 100 <= 1000 < 880 + 130
    (gang(800, running_s=880, factor=1.0), "other"),  # ran its time inside the window, not reported finished
    (gang(800, running_s=920), "waits"),  # started too late even unstretched; 800 + 130 <= 1000
    (gang(800), "waits"),  # never placed: factor 1.3 known from nothing else is still its own
    (gang(800, factor=None), "waits"),  # never placed: 800 + 100
    (gang(880, running_s=960), "waits_and_spread"),  # 880 + 130 > 1000 >= 880 + 100
    (gang(950), "too_late"),  # 950 + 100 > 1000 whatever the variant
    (gang(800, run_s=None), "unknown"),
    (gang(None), "unknown"),
])
def test_each_reason_is_the_first_that_explains_the_gang(g: GangRun, reason: str) -> None:
    assert reason_not_completed(g, END) == reason


def test_a_difference_in_completed_jobs_is_the_difference_of_the_reasons() -> None:
    """Two variants of one load: the same four gangs, created at 0, 700, 800 and 950 s.  One waits less and
    spreads more than the other; its completed count differs from the other's by exactly the reasons'
    difference, and too_late is the same for both."""
    created = (0, 700, 800, 950)
    packed = [gang(0, 10, 110, 1.0, key="a"), gang(700, 910, None, 1.0, key="b"),
              gang(800, 920, None, 1.0, key="c"), gang(950, key="d")]
    spread = [gang(0, 1, 131, 1.3, key="a"), gang(700, 701, 831, 1.3, key="b"),
              gang(800, 880, None, 1.3, key="c"), gang(950, key="d")]
    assert [g.created_ms for g in packed] == [g.created_ms for g in spread] == [c * 1000.0 for c in created]
    p = throughput_decomposition(packed, 0.0, END)
    s = throughput_decomposition(spread, 0.0, END)
    assert (p["gangs"], p["completed"], s["completed"]) == (4, 1, 2)
    assert p["not_completed"] == {"spread": 0, "waits": 2, "waits_and_spread": 0, "too_late": 1, "other": 0,
                                  "unknown": 0}
    assert s["not_completed"] == {"spread": 1, "waits": 0, "waits_and_spread": 0, "too_late": 1, "other": 0,
                                  "unknown": 0}
    lost = {r: s["not_completed"][r] - p["not_completed"][r] for r in p["not_completed"]}
    assert s["completed"] - p["completed"] == -sum(lost.values())
    assert p["jobs_per_hour"] == 3.6 and s["jobs_per_hour"] == 7.2
    assert p["completed_wait_s_avg"] == 10.0 and s["completed_wait_s_avg"] == 1.0
    assert p["completed_stretch_s_avg"] == 0.0 and s["completed_stretch_s_avg"] == pytest.approx(30.0)


def test_gangs_created_outside_the_window_and_completions_after_it_do_not_count() -> None:
    before = gang(-10, 0, 100, key="before")
    after_end = gang(500, 510, 1200, factor=1.0, key="late")  # completed, but after the end: other
    t = throughput_decomposition([before, after_end], 0.0, END)
    assert (t["gangs"], t["completed"]) == (1, 0) and t["not_completed"]["other"] == 1


def test_a_gang_placed_again_is_judged_by_its_latest_placement() -> None:
    """A gang of 2 (gang-min 2) first spread over two blocks, preempted (its pods deleted, not listed at the
    end), then created again inside rack0, where it completed: its row is the second placement's (one rack,
    two earlier members), it was created when its first pods were and completed when its second pods did."""
    from test_topology_figures import POOL, node

    from hollowscale.topology.figures import gang_placements, gangs_of
    from hollowscale.topology.levels import PoolLevels
    from hollowscale.topology.throughput import gang_runs
    from hollowscale.topology.timeline import Member, node_places

    def member(uid: str, where: str, created_s: float, running_s: float, end_s: float, listed: bool) -> Member:
        return Member(uid=uid, namespace="ns", gang="g", workload="train", gpus=4.0, gang_min=2, node=where,
                      created_at=created_s, scheduled_ms=ms(running_s), running_ms=ms(running_s), end_ms=ms(end_s),
                      listed=listed, succeeded_ms=ms(end_s) if listed else None, run_s=30.0)

    ms_ = [member("o1", "gpu-0", 10, 12, 20, False), member("o2", "gpu-4", 10, 12, 20, False),
           member("n1", "gpu-0", 21, 25, 60, True), member("n2", "gpu-1", 21, 25, 61, True)]
    levels = PoolLevels([POOL])
    rows = gang_placements(ms_, node_places([node(i) for i in range(8)]), levels)
    assert [(r["members"], r["earlier_members"], r["nodes"], r["level"], r["placed"]) for r in rows] == [
        (2, 2, 2, "rack", True)]
    (run,) = gang_runs(gangs_of(ms_), levels, {r["gang"]: r["level"] for r in rows})
    assert (run.created_ms, run.all_running_ms, run.completed_ms) == (10_000.0, 25_000.0, 61_000.0)
    assert run.factor == POOL.topology.spread_factor("rack")


@pytest.mark.parametrize(("nodes", "level", "whole"), [
    (["gpu-0", "gpu-0", "gpu-1", "gpu-1"], "host", True),  # two hosts, 2 pods each: slices of 2 per host
    (["gpu-0", "gpu-0", "gpu-0", "gpu-1"], "host", False),  # 3 + 1 on hosts: no slice of 2 holds the odd one
    (["gpu-0", "gpu-1", "gpu-2", "gpu-3"], "rack", True),  # rack0 2, rack1 2
    (["gpu-0", "gpu-1", "gpu-2", "gpu-4"], "rack", False),  # rack0 2, rack1 1, rack2 1
])
def test_slices_are_whole_when_each_domain_holds_a_multiple_of_the_slice_size(nodes: list[str], level: str,
                                                                              whole: bool) -> None:
    from test_topology_figures import POOL

    from hollowscale.topology.figures import slices_whole

    lv = POOL.topology.level_labels()
    labels = [POOL.topology_labels(int(n.split("-")[1])) for n in nodes]
    assert slices_whole(lv, labels, level, 2) is whole
    assert slices_whole(lv, labels, "block", 4) is (nodes[-1] != "gpu-4")  # all four in block0, or 3 + 1
