"""The report checker's Chromium (tests/browser.py) leaves nothing behind: its profile, and everything
Chromium writes besides it (its own temp folder with the singleton socket, the crash database, dconf and
NSS files, which go to the temp folder and the home folder), is inside one folder that is removed once
every Chromium process is gone."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from browser import check_page, chromium_env, remove_profile


def test_chromium_env_points_its_temp_home_and_xdg_folders_into_the_profile(tmp_path: Path) -> None:
    env = chromium_env(tmp_path)
    for var in ("TMPDIR", "HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME"):
        assert Path(env[var]).parent == tmp_path and Path(env[var]).is_dir(), var
    assert remove_profile(tmp_path) == [] and not tmp_path.exists()


@pytest.mark.integration  # starts Chromium
def test_a_page_check_leaves_nothing_in_the_temp_folder(short_tmp_path: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    # the temp folder of this process and of every program it starts: Chromium's own files land there
    # unless tests/browser.py points them into the profile
    monkeypatch.setattr(tempfile, "tempdir", str(short_tmp_path))
    monkeypatch.setenv("TMPDIR", str(short_tmp_path))
    page = tmp_path / "page.html"
    page.write_text("<html><body><figure class='plot'><svg><path d='M0 0'/></svg></figure></body></html>")
    check = check_page(page, tmp_path / "page.png")
    assert check.plots == 1 and check.errors == []
    assert sorted(p.name for p in short_tmp_path.iterdir()) == []
