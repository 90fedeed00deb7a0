"""The temp-folder guard's rules (tests/tmpguard.py) over two listings: what a session made is named, keys
first; what was there before, what another user made, what is older than the session, and what is not of
a kind our code writes, never."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import tmpguard
from tmpguard import Entry, leftovers_in_own, listing, new_entries, pem_kind

from hollowscale.paths import TEMP_LEDGER_VAR, record_temp, short_temp_dir

UID = 1000
STARTED = 1_000_000.0


def entry(name: str, inode: int = 1, uid: int = UID, ctime: float = STARTED + 5, is_dir: bool = False,
          pem: str | None = None) -> Entry:
    return Entry(name, inode, uid, ctime, is_dir, pem)


def test_pem_first_lines() -> None:
    assert pem_kind(b"-----BEGIN PRIVATE KEY-----\n") == "private key"
    assert pem_kind(b"-----BEGIN EC PRIVATE KEY-----\n") == "private key"
    assert pem_kind(b"-----BEGIN RSA PRIVATE KEY-----\r\n") == "private key"
    assert pem_kind(b"-----BEGIN OPENSSH PRIVATE KEY-----\n") == "private key"
    assert pem_kind(b"-----BEGIN ENCRYPTED PRIVATE KEY-----\n") == "private key"
    assert pem_kind(b"-----BEGIN CERTIFICATE-----\n") == "certificate"
    assert pem_kind(b"-----BEGIN PUBLIC KEY-----\n") is None
    assert pem_kind(b"# Issuer: CN=GlobalSign\n") is None  # a CA bundle's comment line (pip's certifi copy)
    assert pem_kind(b"") is None


def test_new_entries_of_ours_are_named_keys_first() -> None:
    before = {"hsperfdata_root": entry("hsperfdata_root", 9, ctime=STARTED - 100, is_dir=True)}
    after = {
        **before,
        "hs-t-abcd1234": entry("hs-t-abcd1234", 2, is_dir=True),
        "tmpq1w2e3r4": entry("tmpq1w2e3r4", 3, pem="certificate"),
        "tmpz9x8c7v6": entry("tmpz9x8c7v6", 4, pem="private key"),
        ".org.chromium.Chromium.Ab12Cd": entry(".org.chromium.Chromium.Ab12Cd", 5, is_dir=True),
        "torchinductor_root": entry("torchinductor_root", 6, is_dir=True),
        "dp-x1y2z3": entry("dp-x1y2z3", 7, is_dir=True),
    }
    found = [e.name for e in new_entries(before, after, STARTED, UID)]
    assert found == ["tmpz9x8c7v6", "tmpq1w2e3r4", ".org.chromium.Chromium.Ab12Cd", "dp-x1y2z3", "hs-t-abcd1234",
                     "torchinductor_root"]


def test_what_is_not_ours_is_never_named() -> None:
    before = {"hs-session-old": entry("hs-session-old", 10, ctime=STARTED - 50, is_dir=True),
              "hs-reused": entry("hs-reused", 11, ctime=STARTED - 50, is_dir=True)}
    after = {
        # there before, and changed during the session (a file added inside): the same inode, not new
        "hs-session-old": entry("hs-session-old", 10, ctime=STARTED + 30, is_dir=True),
        "hs-other-user": entry("hs-other-user", 12, uid=UID + 1, is_dir=True),  # another user's
        "tmpkey-other-user": entry("tmpkey-other-user", 13, uid=UID + 1, pem="private key"),
        "hs-older": entry("hs-older", 14, ctime=STARTED - 60, is_dir=True),  # made before the session
        "go-build123": entry("go-build123", 15, is_dir=True),  # Go's own, removed by Go
        "pytest-of-root": entry("pytest-of-root", 16, is_dir=True),  # pytest's own
        "tmpabcdef": entry("tmpabcdef", 17),  # a temp file that holds no key: not ours to judge
        "hs-pytest-mine0000": entry("hs-pytest-mine0000", 18, is_dir=True),  # excluded by name
    }
    assert new_entries(before, after, STARTED, UID, exclude={"hs-pytest-mine0000"}) == []
    # a name there before but now another inode (removed and made again during the session) is new
    after["hs-reused"] = entry("hs-reused", 19, is_dir=True)
    assert [e.name for e in new_entries(before, after, STARTED, UID)] == ["hs-pytest-mine0000", "hs-reused"]


def test_coarse_times_get_a_second_of_slack() -> None:
    after = {"hs-x": entry("hs-x", ctime=STARTED - 0.5, is_dir=True)}
    assert [e.name for e in new_entries({}, after, STARTED, UID)] == ["hs-x"]


def test_listing_reads_kinds_and_the_leftovers_of_the_own_folder(tmp_path: Path) -> None:
    (tmp_path / "tmpkey").write_bytes(b"-----BEGIN EC PRIVATE KEY-----\nMHc=\n-----END EC PRIVATE KEY-----\n")
    (tmp_path / "tmpcert").write_bytes(b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    (tmp_path / "notes.txt").write_text("hello\n")
    (tmp_path / "pytest-of-someone").mkdir()
    (tmp_path / "hs-ctd-abc").mkdir()
    (tmp_path / "kube-cache").mkdir()  # the guard's own (kubectl's cache): not a leftover
    os.symlink("/nonexistent", tmp_path / "link")
    seen = listing(tmp_path)
    assert seen["tmpkey"].pem == "private key" and seen["tmpcert"].pem == "certificate"
    assert seen["notes.txt"].pem is None and seen["hs-ctd-abc"].is_dir and not seen["link"].is_dir
    assert seen["tmpkey"].uid == os.geteuid()
    assert leftovers_in_own(tmp_path) == [f"{tmp_path}/tmpkey (private key)", f"{tmp_path}/tmpcert (certificate)",
                                          f"{tmp_path}/hs-ctd-abc/", f"{tmp_path}/link", f"{tmp_path}/notes.txt"]
    assert listing(tmp_path / "missing") == {}


def test_the_names_our_code_gives() -> None:
    ours = ["hs-session-a1", "hs-t-b2", "hs-ctd-c3", "hs-chromium-d4", "hs-replay-e5", "hs-kindgpu-f6", "hollowscale-x",
            "dp-g7", "dra-h8", "torchinductor_root", ".org.chromium.Chromium.i9", "org.chromium.Chromium.j0",
            ".com.google.Chrome.k1", "matplotlib-l2"]
    theirs = ["pytest-of-root", "go-build1", "hsperfdata_root", "tmp.V3urxGkKUP", "python-build.1.log", "bash_jobs.0"]
    assert all(tmpguard.OUR_NAMES.fullmatch(n) for n in ours)
    assert not any(tmpguard.OUR_NAMES.fullmatch(n) for n in theirs)


def test_the_ledger_names_exactly_what_the_session_made_and_left_keys_first(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    ledger = tmp_path / "ledger"
    monkeypatch.setenv(TEMP_LEDGER_VAR, str(ledger))
    made = short_temp_dir("hs-ledger-test-")  # straight in /tmp, recorded by the process that made it
    try:
        gone = tmp_path / "gone"
        record_temp(gone)  # recorded, then removed by its owner: not a leftover
        keyed = tmp_path / "keyed"
        keyed.mkdir()
        (keyed / "client.key").write_bytes(b"-----BEGIN EC PRIVATE KEY-----\nMHc\n-----END EC PRIVATE KEY-----\n")
        record_temp(keyed)
        record_temp(keyed)  # twice: named once
        assert ledger.read_text().splitlines() == [str(made), str(gone), str(keyed), str(keyed)]
        assert tmpguard.recorded_leftovers(ledger) == [f"{keyed}/ (holds a private key)", f"{made}/"]
    finally:
        made.rmdir()
    assert tmpguard.recorded_leftovers(ledger) == [f"{keyed}/ (holds a private key)"]
    assert tmpguard.recorded_leftovers(tmp_path / "no-ledger") == []
