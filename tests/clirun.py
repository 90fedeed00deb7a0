"""Run a hollowscale command as a user would, and stop it as a user would when a test gives up on it.

``subprocess.run(..., timeout=)`` ends a command that overruns with SIGKILL, and so does the test
runner's own timeout through ``subprocess.run``'s clean-up: a ``hollowscale run`` killed that way never
tears down the cluster, agents, Locust and Prometheus it started (they run in their own sessions).
:func:`run_cli` instead interrupts it like Ctrl-C (SIGINT: the command tears down what it started and
exits 130), waits for that, and only then kills what is left of its process group. It does so on its
own timeout and on anything that ends the test early, pytest-timeout's alarm included, so a test that
times out still tears down what it started. Keep ``timeout_s + TEARDOWN_S`` below the test's own
pytest timeout (``tests/unit/test_suite_timeouts.py`` checks every test module).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Sequence
from pathlib import Path

#: how long an interrupted command gets for its teardown before its process group is killed
TEARDOWN_S = 90.0


def interrupt(proc: subprocess.Popen[str], teardown_s: float = TEARDOWN_S) -> None:
    """SIGINT (Ctrl-C) to ``proc``; after ``teardown_s`` without an exit, SIGKILL to its process group."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=teardown_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)


def run_cli(argv: Sequence[str], timeout_s: float, *, cwd: Path | None = None,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``argv`` to its end (stdout and stderr captured as text), or interrupted and torn down on
    ``timeout_s`` or on any exception in the waiting test; the timeout fails the test with the output's tail."""
    proc = subprocess.Popen(list(argv), cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        interrupt(proc)
        out, err = proc.communicate()
        raise AssertionError(f"{' '.join(argv[:4])} ... ran past {timeout_s:.0f} s; interrupted (exit "
                             f"{proc.returncode}). Output tail:\n{out[-3000:]}\n{err[-3000:]}") from None
    except BaseException:
        interrupt(proc)
        raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
