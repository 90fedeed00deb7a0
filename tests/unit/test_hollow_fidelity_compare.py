"""The differential comparison (hollow.fidelity) on status documents.

The timelines built here are small hand-made documents that exercise the comparison's rules (they
are not claimed to be what a kubelet writes); statuses recorded from a real kubelet are compared in
tests/unit/test_hollow_fidelity_recorded.py and live in tests/integration/test_hollow_fidelity.py.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from hollow.fidelity import PENDING_ENTRY, TERMINATING_ENTRY, compare, field_paths, left_out_paths, milestones

README = Path(__file__).resolve().parents[2] / "docs" / "hollow-fidelity.md"  # the allow-list's page


def cond(kind: str, status: str, reason: str | None = None) -> dict[str, Any]:
    c = {"type": kind, "status": status, "lastTransitionTime": "2026-12-01T18:00:00Z", "lastProbeTime": None}
    if reason:
        c["reason"] = reason
    return c


def snap(phase: str, ready: bool, state: dict[str, Any], *extra: dict[str, Any]) -> dict[str, Any]:
    return {"phase": phase, "conditions": [cond("PodScheduled", "True"), cond("Initialized", "True"),
                                           cond("ContainersReady", "True" if ready else "False"),
                                           cond("Ready", "True" if ready else "False"), *extra],
            "containerStatuses": [{"name": "main", "ready": ready, "started": True, "state": state,
                                   "lastState": {}, "resources": {"requests": {"cpu": "1"}}}]}


RUN = {"running": {"startedAt": "2026-12-01T18:00:00Z"}}


def timeline() -> list[dict[str, Any]]:
    return [snap("Pending", False, {"waiting": {"reason": "ContainerCreating"}}),
            snap("Running", False, RUN), snap("Running", True, RUN)]


def test_field_paths_skip_nulls_and_empties_and_treat_resource_maps_as_leaves() -> None:
    paths = field_paths(snap("Running", True, RUN))
    assert "status.containerStatuses[].resources" in paths
    assert "status.containerStatuses[].resources.requests.cpu" not in paths
    assert "status.conditions[].lastProbeTime" not in paths and "status.containerStatuses[].lastState" not in paths
    assert "status.containerStatuses[].state.running.startedAt" in paths


def test_identical_timelines_agree() -> None:
    assert compare(timeline(), timeline(), ()).ok


def test_a_missing_field_is_reported_unless_the_readme_lists_it() -> None:
    hollow = timeline()
    for s in hollow:
        del s["containerStatuses"][0]["resources"]
    result = compare(timeline(), hollow, ())
    assert result.only_real == ("status.containerStatuses[].resources",) and not result.only_hollow
    assert compare(timeline(), hollow, ("status.containerStatuses[].resources",)).ok
    # an entry covers what lies under it, not a sibling whose name merely starts the same
    assert compare(timeline(), hollow, ("status.containerStatuses[].res",)).only_real


def test_a_wrong_reason_and_a_state_shape_are_reported() -> None:
    real = [snap("Running", True, RUN), snap("Failed", False, {"terminated": {"exitCode": 3, "reason": "Error"}})]
    real[1]["conditions"][2]["reason"] = real[1]["conditions"][3]["reason"] = "PodFailed"
    hollow = copy.deepcopy(real)
    hollow[1]["conditions"][3]["reason"] = "PodCompleted"
    hollow[1]["containerStatuses"][0]["state"]["terminated"]["exitCode"] = 1
    text = compare(real, hollow, ()).describe()
    assert "('Failed', 'Ready', 'False', 'PodFailed')" in text and "PodCompleted" in text
    assert "('Failed', 'terminated', 'Error', '3', False, True)" in text


def test_ready_at_once_is_an_order_difference_where_the_real_node_waits_for_the_probe() -> None:
    hollow = [snap("Pending", False, {"waiting": {}}), snap("Running", True, RUN)]
    result = compare(timeline(), hollow, (PENDING_ENTRY,))
    assert "order: real Ready=True > phase=Running, hollow Ready=True = phase=Running" in result.problems
    # ... and the not-ready Running state is missing
    assert any("('Running', 'Ready', 'False', '')" in p for p in result.problems)


def test_the_pending_entry_drops_the_kubelets_pending_write_from_the_comparison() -> None:
    hollow = timeline()[1:]
    assert not compare(timeline(), hollow, ()).ok
    assert compare(timeline(), hollow, (PENDING_ENTRY,)).ok


def test_the_terminating_entry_drops_terminated_containers_under_phase_running() -> None:
    done = {"terminated": {"exitCode": 0, "reason": "Completed"}}
    real = [snap("Running", True, RUN), snap("Running", False, done), snap("Succeeded", False, done)]
    hollow = [snap("Running", True, RUN), snap("Succeeded", False, done)]
    assert not compare(real, hollow, ()).ok
    assert compare(real, hollow, (TERMINATING_ENTRY,)).ok
    # only that state: a Running pod whose containers still run is compared
    assert not compare(real, [hollow[1]], (TERMINATING_ENTRY,)).ok


def test_unknown_entries_and_nothing_left_are_refused() -> None:
    with pytest.raises(ValueError, match="expected status field paths"):
        compare(timeline(), timeline(), ("status (phase Unknown)",))
    with pytest.raises(ValueError, match="nothing left to compare"):
        compare(timeline()[:1], timeline(), (PENDING_ENTRY,))


def test_milestones_are_first_sightings() -> None:
    m = milestones(timeline())
    assert m["phase=Pending"] == 0 and m["phase=Running"] == 1 and m["Ready=True"] == 2 and m["state=running"] == 1


def test_the_allow_list_is_read_from_the_readme() -> None:
    entries = left_out_paths(README.read_text())
    assert entries and all(e in (PENDING_ENTRY, TERMINATING_ENTRY) or e.startswith("status.") for e in entries)
    with pytest.raises(ValueError, match="expected a heading"):
        left_out_paths("# nothing here\n")
    with pytest.raises(ValueError, match="no table rows"):
        left_out_paths("### Hollow-node fidelity: what is deliberately left out\n\ntext\n")


def test_empty_timelines_are_refused() -> None:
    with pytest.raises(ValueError, match="expected statuses from both nodes"):
        compare([], timeline(), ())
