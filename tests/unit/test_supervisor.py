"""The cluster supervisor on real processes (small programs, not the control plane): restart with
backoff and count, requests (stall, kill, restart), stop during a backoff leaves nothing."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

import pytest

from hollowscale.cluster.supervisor import (
    BackoffPolicy,
    ComponentSpec,
    Supervisor,
    add_component,
    component_states,
    exit_text,
    read_events,
    request,
)


def test_backoff_is_the_kubelets() -> None:
    p = BackoffPolicy()
    assert [p.delay(n) for n in range(0, 8)] == [0.0, 10.0, 20.0, 40.0, 80.0, 160.0, 300.0, 300.0]
    assert exit_text(-9) == "killed by SIGKILL" and exit_text(3) == "exit code 3" and exit_text(None) == "running"


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


class Running:
    """A supervisor in a thread of this test process (its children are real processes)."""

    def __init__(self, tmp: Path, policy: BackoffPolicy):
        self.sup = Supervisor(tmp, policy=policy, poll_s=0.02, stop_grace_s=2.0)
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.sup.tick()
            time.sleep(0.02)
        self.sup.stop_all()

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(timeout=20)


def _wait(cond, timeout: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.02)
    raise AssertionError("condition not met in time")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return _state(pid) != "Z"


@pytest.mark.integration  # starts a process
def test_exit_is_restarted_with_backoff_and_counted(tmp_path: Path) -> None:
    marker = tmp_path / "runs"
    # exits with 3 on its first two runs, then stays up
    prog = (f"import pathlib,sys,time; p=pathlib.Path({str(marker)!r}); n=len(p.read_text()) if p.exists() else 0; "
            "p.write_text('x'*(n+1)); print('run', n+1, flush=True); "
            "sys.exit(3) if n < 2 else time.sleep(60)")
    run = Running(tmp_path, BackoffPolicy(initial_s=0.3, cap_s=1.0))
    try:
        add_component(tmp_path, ComponentSpec("flaky", [sys.executable, "-c", prog], str(tmp_path / "flaky.log")))
        _wait(lambda: component_states(tmp_path).get("flaky") is not None
              and component_states(tmp_path)["flaky"].restarts == 2
              and component_states(tmp_path)["flaky"].state == "running", timeout=15)
        st = component_states(tmp_path)["flaky"]
        assert st.last_exit_code == 3 and st.last_reason.startswith("exit code 3")
        exits = [e for e in read_events(tmp_path) if e["event"] == "exited"]
        assert [e["restart_in_s"] for e in exits] == [0.3, 0.6]  # doubling
        starts = [e["t"] for e in read_events(tmp_path) if e["event"] == "started"]
        assert starts[1] - exits[0]["t"] >= 0.29 and starts[2] - exits[1]["t"] >= 0.59
        assert exits[0]["log_tail"][-1] == "run 1"
    finally:
        run.stop()
    assert not _alive(component_states(tmp_path)["flaky"].pid)


@pytest.mark.integration  # starts a process
def test_requests_stall_kill_restart(tmp_path: Path) -> None:
    run = Running(tmp_path, BackoffPolicy(initial_s=0.5, cap_s=1.0))
    try:
        add_component(tmp_path, ComponentSpec("sleeper", [sys.executable, "-c", "import time; time.sleep(120)"],
                                              str(tmp_path / "s.log")))
        _wait(lambda: "sleeper" in component_states(tmp_path))
        pid = component_states(tmp_path)["sleeper"].pid
        ack = request(tmp_path, "stall", "sleeper", 0.5)
        assert ack["event"] == "stalled" and ack["pid"] == pid
        _wait(lambda: _state(pid) == "T", timeout=2)
        _wait(lambda: _state(pid) == "S", timeout=3)
        assert any(e["event"] == "resumed" for e in read_events(tmp_path))
        # a requested restart starts again at once and is not a crash
        assert request(tmp_path, "restart", "sleeper")["event"] == "restarting"
        _wait(lambda: component_states(tmp_path)["sleeper"].restarts == 1
              and component_states(tmp_path)["sleeper"].state == "running")
        st = component_states(tmp_path)["sleeper"]
        assert st.pid != pid and st.consecutive_crashes == 0 and not _alive(pid)
        # a kill is a crash: restarted after the backoff
        pid2 = st.pid
        assert request(tmp_path, "kill", "sleeper")["event"] == "killed"
        _wait(lambda: component_states(tmp_path)["sleeper"].state == "backoff")
        assert component_states(tmp_path)["sleeper"].last_reason.startswith("killed by SIGKILL")
        _wait(lambda: component_states(tmp_path)["sleeper"].restarts == 2, timeout=5)
        assert not _alive(pid2)
        with pytest.raises(ValueError, match="no supervised component 'nope'"):
            request(tmp_path, "kill", "nope")
        with pytest.raises(ValueError, match="unknown action"):
            request(tmp_path, "pause", "sleeper")
    finally:
        run.stop()
    assert not _alive(component_states(tmp_path)["sleeper"].pid)
    assert component_states(tmp_path)["sleeper"].state == "stopped"


@pytest.mark.integration  # starts a process
def test_stop_during_backoff_and_while_stalled_leaves_nothing(tmp_path: Path) -> None:
    run = Running(tmp_path, BackoffPolicy(initial_s=30.0, cap_s=60.0))
    add_component(tmp_path, ComponentSpec("dies", [sys.executable, "-c", "import sys; sys.exit(1)"], str(tmp_path / "d.log")))
    add_component(tmp_path, ComponentSpec("frozen", [sys.executable, "-c", "import time; time.sleep(120)"],
                                          str(tmp_path / "f.log")))
    _wait(lambda: component_states(tmp_path).get("dies") is not None
          and component_states(tmp_path)["dies"].state == "backoff" and "frozen" in component_states(tmp_path))
    frozen = component_states(tmp_path)["frozen"].pid
    request(tmp_path, "stall", "frozen", 600)
    t0 = time.monotonic()
    run.stop()
    assert time.monotonic() - t0 < 5  # the stalled one was continued so SIGTERM landed at once
    states = component_states(tmp_path)
    assert states["dies"].state == "stopped" and states["frozen"].state == "stopped"
    assert not _alive(frozen)
