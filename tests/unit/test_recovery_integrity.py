"""Pure logic of the fault report: recovery time from bindings, the audit log count, counter resets."""

from __future__ import annotations

import json
from pathlib import Path

from hollowscale.measure.integrity import integrity, read_audit
from hollowscale.measure.prom import counter_increase
from hollowscale.measure.recovery import fault_recovery, recovery_figures
from hollowscale.measure.timeline import JobRecord, PodRecord


def _steady(start_s: float, end_s: float, per_s: int, gap: tuple[float, float] | None = None) -> list[float]:
    """Binding times (ms) at ``per_s`` a second, none inside ``gap`` (s)."""
    out = []
    t = start_s
    while t < end_s:
        if gap is None or not gap[0] <= t < gap[1]:
            out.extend(t * 1000 + i * 1000 / per_s for i in range(per_s))
        t += 1
    return out


def test_recovery_is_the_first_window_back_after_the_dip() -> None:
    # 4 pods/s, nothing bound from 60 s to 85 s (a 15 s stall at 60 s plus 10 s to catch up)
    bound = _steady(0, 200, 4, gap=(60, 85))
    r = fault_recovery(bound, 60_000, 75_000, 0, 200_000)
    assert r["level_before_pods_per_s"] == 4.0
    assert r["dip_at_s"] == 0.0 and r["recovered"] is True
    assert 24.0 <= r["recovery_s"] <= 25.5


def test_a_fault_that_does_not_dent_the_rate_recovers_in_zero() -> None:
    r = fault_recovery(_steady(0, 200, 4), 60_000, 60_000, 0, 200_000)
    assert r["recovered"] is True and r["recovery_s"] == 0.0 and "never fell" in r["note"]


def test_unrecovered_and_no_level() -> None:
    bound = _steady(0, 60, 4)  # nothing bound after the fault, ever
    r = fault_recovery(bound, 60_000, 60_000, 0, 120_000)
    assert r["recovered"] is False and r["recovery_s"] == 60.0
    early = fault_recovery(bound, 3_000, 3_000, 0, 120_000)
    assert early["recovered"] is None and "no level" in early["note"]
    figs = recovery_figures([r, {"recovered": True, "recovery_s": 12.0}, early])
    assert figs == {"max": 60.0, "p50": 12.0, "unrecovered": 1, "count": 3}


def test_counter_increase_sums_across_resets() -> None:
    samples = [(9.0, 100.0), (10.0, 104.0), (11.0, 110.0), (12.0, 3.0), (13.0, 7.0), (14.0, 7.0)]
    assert counter_increase(samples, 10.0) == (6.0 + 3.0 + 4.0, 1)
    assert counter_increase([(20.0, 5.0), (21.0, 8.0)], 10.0) == (8.0, 0)  # began inside the window


def _audit(verb: str, resource: str, code: int, ns: str = "load", sub: str | None = None, name: str | None = None,
           user: str = "kubernetes-admin", stage: str = "ResponseComplete", ts: str = "2026-12-01T10:00:01.5Z") -> str:
    ref = {"resource": resource, "namespace": ns, "apiVersion": "v1"}
    if sub:
        ref["subresource"] = sub
    if name:
        ref["name"] = name
    return json.dumps({"kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "Metadata", "stage": stage,
                       "verb": verb, "objectRef": ref, "user": {"username": user},
                       "responseStatus": {"code": code}, "requestReceivedTimestamp": ts})


def _pod(name: str, scheduled: bool) -> PodRecord:
    return PodRecord(uid=f"u-{name}", name=name, workload="w", role="r", instance="1", owner_kind="Job",
                     owner_uid="j", gpus=0.0, created_ms=1.0, scheduled_ms=2.0 if scheduled else None)


def test_audit_counts_and_the_integrity_verdict(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    t0 = 1796119200.0  # 2026-12-01T10:00:00Z
    lines = [
        _audit("create", "jobs", 201), _audit("create", "jobs", 201),
        _audit("create", "pods", 201, user="system:serviceaccount:kube-system:job-controller"),
        _audit("create", "pods", 201, user="system:serviceaccount:kube-system:job-controller"),
        _audit("create", "pods", 201, sub="binding", name="a", user="system:kube-scheduler"),
        _audit("create", "pods", 201, sub="binding", name="b", user="system:kube-scheduler"),
        _audit("create", "pods", 409, sub="binding", name="b", user="system:kube-scheduler"),
        _audit("create", "jobs", 201, ns="other"),
        _audit("create", "jobs", 201, stage="ResponseStarted"),
        _audit("create", "jobs", 201, ts="2026-12-01T11:00:00Z"),  # after the window
        '{"kind": "Event", "stage": "Respon',  # cut by a killed apiserver
    ]
    log.write_text("\n".join(lines) + "\n")
    a = read_audit(log, "load", t0, t0 + 60)
    assert (a.jobs, a.pods, a.bindings) == (2, 2, {"a": 1, "b": 1})
    assert a.refused == {"pods/binding 409": 1}
    assert a.creates_by_user == {"kubernetes-admin": 2, "system:serviceaccount:kube-system:job-controller": 2}
    jobs = [JobRecord("j1", "j1", "Job", "w", "r", "1", 0.0, 1, 1.0), JobRecord("j2", "j2", "Job", "w", "r", "1", 0.0, 1, 1.0)]
    ok = integrity(a, [_pod("a", True), _pod("b", True)], jobs, 2)
    assert ok["verdict"].startswith("ok") and ok["double_counted"] == 0 and ok["bindings_lost"] == 0
    bad = integrity(a, [_pod("a", True), _pod("c", True)], jobs[:1], 2)
    assert (bad["jobs_lost"], bad["pods_lost"], bad["bindings_lost"], bad["double_counted"]) == (1, 0, 1, 1)
    assert bad["bindings"]["bound_not_seen"] == ["b"] and bad["bindings"]["seen_not_bound"] == ["c"]
    assert read_audit(tmp_path / "missing.log", "load", t0, t0 + 60).lines == 0

