"""A quantile read from a Prometheus histogram carries the bucket ``histogram_quantile`` interpolated it
in, read from the histogram's own ``le`` series (``hollowscale/measure/prom.py``).

Recorded data: ``tests/fixtures/prometheus/gang-contention-default.json`` (:mod:`recorded`): the queries
:class:`PromQueries` sent to a real run's Prometheus (gang-contention, default variant) and the answers.
"""

from __future__ import annotations

import math

import pytest
from recorded import RecordedProm, load

from hollowscale.measure.prom import BUCKETED, bucket_counts, quantile_bucket
from hollowscale.plan.scrape import histogram_quantile

RECORDED = load("gang-contention-default")
#: the apiserver's SLI histogram edges in seconds, as its ``le`` labels in the recorded run say
API_EDGES = [0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 15.0, 20.0, 30.0, 45.0,
             60.0, math.inf]


def cumulative(counts: list[float]) -> dict[float, float]:
    out, total = {}, 0.0
    for le, n in zip(API_EDGES, counts, strict=True):
        total += n
        out[le] = total
    return out


@pytest.mark.parametrize("counts", [
    [1225.2, 5.0] + [0.0] * 20,                      # the recorded POST: all but 5 requests below 50 ms
    [100, 200, 300, 50, 20, 10, 5, 3, 2, 1, 1, 1] + [0.0] * 10,
    [0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
    [10] * 22,
])
@pytest.mark.parametrize("q", [0.01, 0.5, 0.9, 0.99, 0.999])
def test_the_bucket_holds_what_histogram_quantile_interpolates(counts: list[float], q: float) -> None:
    cum = cumulative(counts)
    lo, hi = quantile_bucket(q, cum) or (None, None)
    value = histogram_quantile(q, cum)  # Prometheus' interpolation (the plan's own copy of it)
    assert lo is not None and value is not None
    if hi is None:  # the +Inf bucket: histogram_quantile answers its lower edge, the truth is above it
        assert value == lo == 60.0
    else:
        assert lo <= value <= hi and API_EDGES.index(hi) == (API_EDGES.index(lo) + 1 if lo else 0)


def test_bucket_edge_cases() -> None:
    assert quantile_bucket(0.5, {0.05: 0.0, math.inf: 0.0}) is None  # no observations
    assert quantile_bucket(0.5, {0.05: 3.0}) is None  # no +Inf bucket: not a histogram Prometheus reads
    assert quantile_bucket(0.5, {0.05: 10.0, 0.1: 20.0, math.inf: 20.0}) == (0.0, 0.05)  # rank 10 = the edge
    assert quantile_bucket(0.51, {0.05: 10.0, 0.1: 20.0, math.inf: 20.0}) == (0.05, 0.1)
    assert quantile_bucket(0.5, {0.05: 10.0, 0.1: 8.0, math.inf: 30.0}) == (0.1, None)  # made monotonic first
    series = [{"metric": {"verb": "POST", "le": "0.05"}, "value": [0, "9"]},
              {"metric": {"verb": "POST", "le": "+Inf"}, "value": [0, "10"]},
              {"metric": {"verb": "POST", "le": "NaN"}, "value": [0, "10"]}]
    assert bucket_counts(series, ("verb",)) == {("POST",): {0.05: 9.0, math.inf: 10.0}}


def test_recorded_api_latency_carries_its_buckets() -> None:
    start, end = RECORDED["api_window"]
    api = RecordedProm(RECORDED["answers"]).api_latency(start, end)
    post, patch = api["by_verb"]["POST"], api["by_verb"]["PATCH"]
    # "every verb at p50 25 ms, p99 49.6 ms": both interpolated in the apiserver's first bucket, 0-50 ms
    assert (post["p50"], post["p99"]) == (25.102, 49.703)
    assert post["p50_bucket"] == post["p99_bucket"] == [0.0, 50.0] and post["source"] == BUCKETED
    assert patch["p99"] == 86.078 and patch["p99_bucket"] == [50.0, 100.0]
    assert api["by_verb"]["DELETE"]["p99"] is None and api["by_verb"]["DELETE"]["p99_bucket"] is None
    assert api["slo_groups"]["mutating"]["p99_bucket"] == [0.0, 50.0]
    assert api["queries"]["by_verb.buckets"].startswith("sum by (verb, le) (increase(apiserver_request_sli_duration")
    start, end = RECORDED["window"]
    sched = RecordedProm(RECORDED["answers"]).scheduler(start, end)["attempt_duration_ms"]
    assert sched["p99"] == 31.431 and sched["p99_bucket"] == [16.0, 32.0] and sched["source"] == BUCKETED
