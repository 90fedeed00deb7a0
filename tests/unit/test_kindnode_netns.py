"""The network namespaces of a kind cluster's nodes (hollowscale/kindnode/netns.py): recorded from what podman
says while the containers exist, and after the delete only those recorded, still there, whose container is
gone and that hold no process are deleted; never one for its name.

No process starts here: podman's inspect output and the ``ip netns`` calls are played by fakes."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from hollowscale.kindnode import netns

NS = netns.NETNS_DIR
A, B, C = "netns-aaaa", "netns-bbbb", "netns-cccc"


def test_parse_inspect_keeps_containers_with_a_namespace() -> None:
    out = (f"hollowscale-control-plane\t{NS / A}\n"
           "hollowscale-worker\t\n"  # created, never started, or stopped: no namespace
           f"hollowscale-worker2\t{NS / B}\n")
    assert netns.parse_inspect(out) == {"hollowscale-control-plane": str(NS / A), "hollowscale-worker2": str(NS / B)}
    assert netns.parse_inspect("") == {}


def test_the_recorder_keeps_what_it_saw_once_a_container_is_gone() -> None:
    said = [f"cp\t{NS / A}\nw\t\n", f"w\t{NS / B}\n", ""]  # cp gone by the second inspect; both by the third
    asked: list[list[str]] = []

    def inspect(names: Sequence[str]) -> str:
        asked.append(list(names))
        return said[len(asked) - 1]

    rec = netns.Recorder(inspect, ["cp", "w"])
    for _ in said:
        rec.record()
    assert rec.recorded == {str(NS / A): "cp", str(NS / B): "w"}
    assert asked == [["cp", "w"]] * 3
    empty = netns.Recorder(lambda names: (_ for _ in ()).throw(AssertionError("no container to ask about")), [])
    empty.record()
    assert empty.recorded == {}


def test_watching_records_while_the_body_runs_and_stops_with_it() -> None:
    seen = threading.Event()
    calls = 0

    def inspect(names: Sequence[str]) -> str:
        nonlocal calls
        calls += 1
        seen.set()
        return f"cp\t{NS / A}\n"

    rec = netns.Recorder(inspect, ["cp"])
    with rec.watching(interval_s=0.01):
        assert seen.wait(10)
        assert any(t.name == "netns-recorder" for t in threading.enumerate())
    assert rec.recorded == {str(NS / A): "cp"} and calls >= 1
    assert not any(t.name == "netns-recorder" for t in threading.enumerate())  # joined with the body's end


def test_plan_deletes_only_recorded_present_empty_namespaces_of_gone_containers() -> None:
    recorded = {str(NS / A): "cp", str(NS / B): "w", str(NS / C): "w2", str(NS / "netns-gone"): "w3",
                "/var/run/other/netns-x": "w4", str(NS / "netns-alive"): "w5", str(NS / "netns-unread"): "w6"}
    present = {A, B, C, "netns-alive", "netns-unread", "netns-not-recorded"}
    plan = netns.plan_removal(recorded, present, alive={"w5"},
                              pids={A: [], B: [4242], C: [], "netns-alive": [], "netns-unread": None,
                                    "netns-not-recorded": []})
    assert plan.delete == [A, C]
    assert "netns-not-recorded" not in plan.delete  # present and empty, but never recorded: not ours to touch
    text = "\n".join(plan.lines)
    assert f"left {NS / B} (of w): processes 4242 are in it" in text
    assert f"left {NS / 'netns-alive'}: its container w5 still exists" in text
    assert "ip netns pids failed" in text and "netns-unread" in text
    assert "left /var/run/other/netns-x (of w4): not a namespace in" in text
    assert "netns-gone" not in text  # podman's own teardown removed it: nothing to say
    assert len(plan.lines) == 4


@dataclass
class FakeOps:
    """``ip netns`` and ``podman container exists`` over a dict: name -> pids (None: unreadable)."""

    namespaces: dict[str, list[int] | None]
    containers: set[str] = field(default_factory=set)
    fail_delete: set[str] = field(default_factory=set)
    calls: list[tuple[str, str]] = field(default_factory=list)

    def exists(self, name: str) -> bool:
        self.calls.append(("exists", name))
        return name in self.namespaces

    def container_exists(self, container: str) -> bool:
        self.calls.append(("container_exists", container))
        return container in self.containers

    def pids(self, name: str) -> list[int] | None:
        self.calls.append(("pids", name))
        return self.namespaces[name]

    def delete(self, name: str) -> str | None:
        self.calls.append(("delete", name))
        if name in self.fail_delete:
            return "Device or resource busy"
        del self.namespaces[name]
        return None


def test_remove_recorded_deletes_exactly_the_planned_names_and_says_so() -> None:
    ops = FakeOps({A: [], B: [7], C: [], "netns-someone-elses": []}, fail_delete={C})
    lines = netns.remove_recorded({str(NS / A): "cp", str(NS / B): "w", str(NS / C): "w2",
                                   str(NS / "netns-gone"): "w3"}, ops)
    assert [c for c in ops.calls if c[0] == "delete"] == [("delete", A), ("delete", C)]
    assert "netns-someone-elses" in ops.namespaces and B in ops.namespaces and A not in ops.namespaces
    assert lines == [f"left {NS / B} (of w): processes 7 are in it",
                     f"ip netns delete {A} (of cp, left empty after its teardown)",
                     f"left {NS / C} (of w2): ip netns delete failed: Device or resource busy"]
    assert not any(name == "netns-someone-elses" for _, name in ops.calls)  # never even looked at


def test_remove_recorded_leaves_a_namespace_whose_container_still_exists() -> None:
    ops = FakeOps({A: []}, containers={"cp"})
    assert netns.remove_recorded({str(NS / A): "cp"}, ops) == [f"left {NS / A}: its container cp still exists"]
    assert A in ops.namespaces


def test_nothing_recorded_nothing_done() -> None:
    ops = FakeOps({A: []})
    assert netns.remove_recorded({}, ops) == []
    assert ops.calls == []


def test_system_ops_reads_presence_in_its_own_folder(tmp_path: Path) -> None:
    (tmp_path / A).write_text("")
    ops = netns.SystemOps(lambda c: False, netns_dir=tmp_path)
    assert ops.exists(A) and not ops.exists(B)
