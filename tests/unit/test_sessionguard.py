"""The suite's own guards (tests/sessionguard.py): a unit test cannot start a process, a test using the
session cluster must be marked integration. The leftover-process check is tested where processes may
start: tests/integration/test_sessionguard_leftovers.py."""

from __future__ import annotations

import asyncio
import os
import subprocess
from dataclasses import dataclass, field
from typing import Any

import pytest
import sessionguard


def test_a_unit_test_cannot_start_a_process() -> None:
    # this test runs under the guard itself (conftest's autouse fixture): every way in is refused
    with pytest.raises(sessionguard.ProcessStartRefused, match="not marked integration"):
        subprocess.run(["true"], check=False)
    with pytest.raises(sessionguard.ProcessStartRefused):
        os.system("true")
    with pytest.raises(sessionguard.ProcessStartRefused):
        os.fork()

    async def spawn() -> None:
        await asyncio.create_subprocess_exec("true")

    with pytest.raises(sessionguard.ProcessStartRefused):
        asyncio.run(spawn())


def test_the_refusal_names_the_test_and_is_undone_after() -> None:
    saved = subprocess.Popen._execute_child  # type: ignore[attr-defined]
    with sessionguard.refuse_processes("tests/unit/x.py::test_y"), pytest.raises(
            sessionguard.ProcessStartRefused, match=r"tests/unit/x.py::test_y started a process"):
        subprocess.run(["true"], check=False)
    assert subprocess.Popen._execute_child is saved  # type: ignore[attr-defined]


@dataclass
class _Item:
    nodeid: str
    fixturenames: list[str]
    markers: set[str] = field(default_factory=set)

    def get_closest_marker(self, name: str) -> Any:
        return name if name in self.markers else None


def test_a_test_using_the_session_cluster_must_be_marked_integration() -> None:
    items = [_Item("a.py::ok", ["cluster"], {"integration"}), _Item("b.py::pure", ["tmp_path"]),
             _Item("c.py::bad", ["tmp_path", "kubectl"])]
    why = sessionguard.unmarked_integration(items)
    assert why is not None and "1 tests use the session cluster" in why and "c.py::bad" in why
    assert "a.py" not in why and "b.py" not in why
    assert sessionguard.unmarked_integration(items[:2]) is None
