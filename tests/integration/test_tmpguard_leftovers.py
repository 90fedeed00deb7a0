"""The temp-folder guard (tests/tmpguard.py) fails a session that leaves a key in its temp folder or a
folder it recorded making in /tmp, naming the key first, never names a folder of our names it did not
make (another run's), and passes a session that leaves nothing; either way the session's own temp folder
goes."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import uuid
from pathlib import Path

import pytest
import sessionguard

pytest_plugins = ("pytester",)
pytestmark = pytest.mark.integration

TESTS = Path(__file__).resolve().parents[1]

CONFTEST = '''
import pytest, sessionguard, tmpguard

def pytest_configure(config):
    sessionguard.mark_session()
    tmpguard.start(config)

@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session, exitstatus):
    sessionguard.fail_on_leftovers(session)
    tmpguard.finish(session)
'''
LEAKY = '''
import os, tempfile
from pathlib import Path

from hollowscale.paths import record_temp

KEY = b"-----BEGIN EC PRIVATE KEY-----\\nMHcCAQEE\\n-----END EC PRIVATE KEY-----\\n"

def test_leaves_a_key_and_a_folder():
    fd, path = tempfile.mkstemp()  # the temp folder: the session's own
    os.write(fd, KEY)
    os.close(fd)
    print("OWN", tempfile.gettempdir())
    Path(os.environ["LEAK_DIR"]).mkdir()  # straight into /tmp, as a short cluster folder is made
    record_temp(Path(os.environ["LEAK_DIR"]))
    Path(os.environ["OTHER_DIR"]).mkdir()  # the same kind of name, but another run's: not in the ledger
'''
CLEAN = '''
import tempfile

def test_leaves_nothing():
    with tempfile.TemporaryDirectory(prefix="hs-clean-") as folder:
        print("OWN", tempfile.gettempdir(), folder)
'''


def _session(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, test: str) -> pytest.RunResult:
    monkeypatch.setenv(sessionguard.MARKER_VAR, uuid.uuid4().hex)  # the inner session's processes, not ours
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(TESTS), *sys.path]))
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_inner=test)
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "-s", timeout=120)


def _own(result: pytest.RunResult) -> Path:
    line = next(line for line in result.outlines if "OWN " in line)
    return Path(line.split("OWN ", 1)[1].split()[0])


def test_a_session_that_leaves_a_key_fails_naming_it_first(pytester: pytest.Pytester,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    leak = Path("/tmp") / f"hs-leak-{uuid.uuid4().hex[:12]}"
    other = Path("/tmp") / f"hs-other-{uuid.uuid4().hex[:12]}"
    monkeypatch.setenv("LEAK_DIR", str(leak))
    monkeypatch.setenv("OTHER_DIR", str(other))
    try:
        result = _session(pytester, monkeypatch, LEAKY)
        assert result.ret == pytest.ExitCode.TESTS_FAILED
        own = _own(result)
        result.stdout.fnmatch_lines(["*2 file(s) or folder(s) this test session wrote in the temp folder*",
                                     f"  {own}/tmp* (private key)", f"  {leak}/"], consecutive=True)
        result.stdout.no_fnmatch_line(f"*{other.name}*")
        assert not own.exists()  # the session's own temp folder went, key and all
    finally:
        for made in (leak, other):  # the exact folders the inner test made
            if made.is_dir():
                shutil.rmtree(made)


def test_a_session_that_leaves_nothing_passes_and_its_temp_folder_goes(pytester: pytest.Pytester,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    result = _session(pytester, monkeypatch, CLEAN)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    own = _own(result)
    assert own.name.startswith("hs-pytest-") and not own.exists()
    result.stdout.no_fnmatch_line("*this test session wrote in the temp folder*")


def test_a_run_without_a_session_leaves_no_temp_folder(pytester: pytest.Pytester,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """``pytest --help`` configures (the guard makes its folder) but runs no session: the folder goes anyway."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(TESTS), *sys.path]))
    pytester.makeconftest(CONFTEST)
    where = Path(tempfile.gettempdir())  # where the inner run makes its folder
    before = {p.name for p in where.iterdir() if p.name.startswith("hs-pytest-")}
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--help", timeout=120)
    assert result.ret == pytest.ExitCode.OK
    assert {p.name for p in where.iterdir() if p.name.startswith("hs-pytest-")} == before
