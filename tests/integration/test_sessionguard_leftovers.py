"""The leftover-process check (tests/sessionguard.py) finds a process the session started and did not
end, by the session's marker in its environment and never by name, ends it, and fails the session."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import sessionguard
from waiting import alive

pytest_plugins = ("pytester",)
pytestmark = pytest.mark.integration

TESTS = Path(__file__).resolve().parents[1]


def test_a_marked_process_is_found_and_ended_and_an_unmarked_one_is_not() -> None:
    session = uuid.uuid4().hex
    marked = subprocess.Popen(["sleep", "300"], env={**os.environ, sessionguard.MARKER_VAR: session},
                              start_new_session=True)
    other = subprocess.Popen(["sleep", "300"], env={**os.environ, sessionguard.MARKER_VAR: "another"},
                             start_new_session=True)
    try:
        found = sessionguard.leftovers(session)
        assert [p.pid for p in found] == [marked.pid] and "sleep 300" in found[0].cmdline
        sessionguard.stop(found)
        marked.wait(timeout=10)
        assert not alive(marked.pid) and alive(other.pid)
        assert sessionguard.leftovers(session) == []
    finally:
        for proc in (marked, other):
            proc.kill()
            proc.wait(timeout=10)


LEAKY = '''
import subprocess

def test_leaks_a_process():
    subprocess.Popen(["sleep", "300"], start_new_session=True)
'''
CONFTEST = '''
import os, pytest, sessionguard

def pytest_configure(config):
    sessionguard.mark_session()

@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session, exitstatus):
    sessionguard.fail_on_leftovers(session)
'''


def test_a_session_whose_test_leaks_a_process_fails_naming_it(pytester: pytest.Pytester,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    # the inner session gets a marker of its own: its guard must never see this session's processes
    inner = uuid.uuid4().hex
    monkeypatch.setenv(sessionguard.MARKER_VAR, inner)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(TESTS), *sys.path]))
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_leaky=LEAKY)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=120)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*1 process(es) started by this test session were still running*",
                                 "*sleep 300*"])
    assert sessionguard.leftovers(inner) == []  # and it is gone
