"""The scenario's ``timeout_s`` counts from the cluster's readiness, not from the run's start: a first kind
run on a fresh machine spends minutes building its node image before the cluster is up (issue 34: the
smoke scenario's 240 s ran out before its load ended, the settle was skipped and jobs created in the
load's last seconds were reported unfinished)."""

from __future__ import annotations

from hollowscale.run.times import RunTimes, SettleWindow


def test_the_run_deadline_counts_from_the_cluster_being_up() -> None:
    times = RunTimes(start=1000.0)
    assert times.run_deadline(240.0) == 1240.0  # before the cluster is up: from the start
    times.cluster_ready = 1218.0  # a cold kind cluster: 218 s of node image, kind build and creation
    assert times.run_deadline(240.0) == 1458.0
    times.load_end = 1247.8  # where that run's load ended: within the limit now, leaving the settle its time
    assert times.run_deadline(240.0) - times.load_end > 60.0


def test_a_settle_cut_by_the_scenario_limit_says_so() -> None:
    times = RunTimes(start=0.0, cluster_ready=10.0)
    window = SettleWindow(settle_s=60.0, timeout_s=240.0, opened=0.0, run_deadline=times.run_deadline(240.0))
    assert window.run_deadline == 250.0
    assert window.unfinished(3, 25, 60.2) == ("settle timeout: 3 of 25 workload objects unfinished 60 s after the "
                                              "load ended (measurements.settle_timeout_s)")
    assert window.unfinished(4, 28, 2.4) == ("settle cut short: 4 of 28 workload objects unfinished when the "
                                             "scenario's timeout_s (240 s from the cluster's readiness) ran out 2 s "
                                             "into the settle")
