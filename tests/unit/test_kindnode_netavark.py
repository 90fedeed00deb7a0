"""What the harness takes back from podman's shared network run state (hollowscale/kindnode/netavark.py,
HostChanges): only the exact paths its ledger named before the cluster, never a file for what it looks like.

Each test plays podman's part with files (no process starts here): our podman's network folder ``nets``
(``kind.json`` while our ``kind`` network exists), the machine's ``etc-networks``, and ``run`` in place of
``/run/containers``, with the configs netavark writes in ``run/networks/aardvark-dns``."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from hollowscale.kindnode import firewall, netavark
from hollowscale.kindnode.cluster import HostChanges

OLD_KIND = "fc00:8866::1,10.89.1.1\nf7e0 10.89.1.13 fc00:8866::d hollowscale-worker2,f7e0\n"


@pytest.fixture
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """Our podman's network folder, the machine's, a missing run folder and a modules folder; no firewall."""
    monkeypatch.setattr(firewall, "snapshot", lambda: {})
    monkeypatch.setattr(firewall, "restore", lambda before: [])
    monkeypatch.setattr(netavark, "SYSTEM_NETWORKS", tmp_path / "etc-networks")
    paths = {"nets": tmp_path / "podman" / "state" / "networks", "system": tmp_path / "etc-networks",
             "run": tmp_path / "run", "modules": tmp_path / "modules"}
    paths["nets"].mkdir(parents=True)
    paths["system"].mkdir()
    paths["dns"] = netavark.dns_dir(paths["run"])
    paths["ledger"] = netavark.ledger_path(paths["nets"])
    return paths


def _kind_created(h: dict[str, Path], gateway: str = "10.89.2.1") -> None:
    """What kind's creation makes: our podman's ``kind`` network and netavark's state for it."""
    (h["nets"] / "kind.json").write_text("{}")
    h["dns"].mkdir(parents=True, exist_ok=True)
    (h["dns"] / "kind").write_text(f"{gateway}\nabc 10.89.2.2  hollowscale-control-plane\n")
    (h["run"] / "networks" / "ipam.db").write_text("")
    (h["run"] / "networks" / "aardvark.lock").write_text("")


def test_the_ledger_is_written_before_the_cluster_and_names_exact_paths(host: dict[str, Path]) -> None:
    changes = HostChanges.record(host["nets"], host["modules"], host["run"])
    doc = json.loads(host["ledger"].read_text())
    assert host["ledger"].parent == host["nets"].parent  # our podman's state folder, not its network folder
    assert list(doc["configs"]) == [str(host["dns"] / "kind")]
    assert doc["configs"][str(host["dns"] / "kind")]["existed"] is False
    assert doc["run_dirs"] == {str(host["run"]): {"existed": False, "time": pytest.approx(
        doc["configs"][str(host["dns"] / "kind")]["time"])}}
    assert changes.made_run_dir and changes.cleared == []


def test_a_stale_config_in_the_ledger_goes_and_another_tools_config_never(host: dict[str, Path]) -> None:
    host["dns"].mkdir(parents=True)
    # another podman's networks' configs: one the machine's podman has, one of a podman whose folder we do
    # not know (the old rule removed that one as "no podman has it")
    (host["system"] / "theirs.json").write_text("{}")
    (host["dns"] / "theirs").write_text("10.88.0.1\n")
    (host["dns"] / "unknown-tools").write_text("10.90.0.1\n")
    changes = HostChanges.record(host["nets"], host["modules"], host["run"])
    _kind_created(host)
    # the cluster's network went without netavark's teardown: podman forgot the network, the config stayed
    (host["nets"] / "kind.json").unlink()
    done = changes.restore(host["modules"], host["run"])
    assert not (host["dns"] / "kind").exists()
    assert any(line.startswith(f"removed {host['dns'] / 'kind'}") for line in done), done
    assert (host["dns"] / "theirs").read_text() == "10.88.0.1\n"
    assert (host["dns"] / "unknown-tools").read_text() == "10.90.0.1\n"
    # the run folder was there before the record: never ours, not even its ipam.db
    assert (host["run"] / "networks" / "ipam.db").exists() and not any(str(host["run"]) + " " in line
                                                                       for line in done), done
    assert not host["ledger"].exists()  # done with: no entry left, no file


def test_a_config_of_ours_whose_network_lives_is_left(host: dict[str, Path]) -> None:
    changes = HostChanges.record(host["nets"], host["modules"], host["run"])
    _kind_created(host)  # the network is still ours (kind delete did not remove it)
    done = changes.restore(host["modules"], host["run"])
    assert (host["dns"] / "kind").exists() and (host["run"] / "networks" / "ipam.db").exists()
    assert f"left {host['run']}: our network's DNS config is still in it" in done
    ledger = netavark.Ledger.load(host["ledger"])
    assert str(host["dns"] / "kind") in ledger.configs and ledger.made_run_dir(host["run"])  # for the next time
    (host["nets"] / "kind.json").unlink()  # the network goes later: the next restore takes both back
    done = changes.restore(host["modules"], host["run"])
    assert not host["run"].exists() and not host["ledger"].exists(), done


def test_a_kind_config_not_in_the_ledger_is_left_with_a_clear_error(host: dict[str, Path]) -> None:
    host["dns"].mkdir(parents=True)
    (host["dns"] / "kind").write_text(OLD_KIND)
    (host["dns"] / "other").write_text("10.91.0.1\n")
    with pytest.raises(netavark.ForeignDnsConfigError) as err:
        HostChanges.record(host["nets"], host["modules"], host["run"])
    message = str(err.value)
    assert message.startswith(f"{host['dns'] / 'kind'}: a DNS config for a network named kind")
    assert "fc00:8866::1,10.89.1.1" in message and "no such host" in message and str(host["ledger"]) in message
    assert (host["dns"] / "kind").read_text() == OLD_KIND and (host["dns"] / "other").exists()
    assert not host["ledger"].exists() and not host["modules"].exists()  # nothing was changed
    (host["system"] / "kind.json").write_text("{}")  # the machine's podman has a network kind: said so
    with pytest.raises(netavark.ForeignDnsConfigError, match="the machine's podman has a network of that name"):
        HostChanges.record(host["nets"], host["modules"], host["run"])
    # a config named otherwise is not in kind's way: the record goes on and leaves it
    (host["dns"] / "kind").rename(host["dns"] / "kind-of-someone")
    changes = HostChanges.record(host["nets"], host["modules"], host["run"])
    changes.restore(host["modules"], host["run"])
    assert (host["dns"] / "kind-of-someone").read_text() == OLD_KIND and (host["dns"] / "other").exists()


def test_a_ledger_written_before_a_killed_creation_lets_the_next_run_clean_exactly_its_file(
        host: dict[str, Path]) -> None:
    HostChanges.record(host["nets"], host["modules"], host["run"])
    _kind_created(host, gateway="fc00:8866::1,10.89.1.1")
    (host["dns"] / "theirs").write_text("10.88.0.1\n")  # someone else's network, made meanwhile
    # killed here: no restore. podman's own record of the network went (a `podman network rm` by hand, or the
    # next run's down), netavark's config stayed
    (host["nets"] / "kind.json").unlink()
    first = json.loads(host["ledger"].read_text())
    nxt = HostChanges.record(host["nets"], host["modules"], host["run"])
    assert not (host["dns"] / "kind").exists() and (host["dns"] / "theirs").exists()
    assert [line.split(",")[0] for line in nxt.cleared] == [
        f"removed {host['dns'] / 'kind'}"], nxt.cleared
    second = json.loads(host["ledger"].read_text())
    # the new cluster's note is a new one; the run folder stays the killed run's (it made it)
    assert second["configs"][str(host["dns"] / "kind")]["time"] > first["configs"][str(host["dns"] / "kind")]["time"]
    assert second["run_dirs"] == first["run_dirs"] and nxt.made_run_dir


def test_a_ledger_entry_older_than_the_file_is_not_trusted(host: dict[str, Path]) -> None:
    HostChanges.record(host["nets"], host["modules"], host["run"])
    host["dns"].mkdir(parents=True)
    (host["dns"] / "kind").write_text(OLD_KIND)
    ledger = netavark.Ledger.load(host["ledger"])
    entry = ledger.configs[str(host["dns"] / "kind")]
    entry["time"] = os.stat(host["dns"] / "kind").st_ctime + 60  # noted absent after the file was there
    ledger.save()
    done = netavark.clear_own_stale_dns(netavark.Ledger.load(host["ledger"]), host["nets"], host["run"])
    assert (host["dns"] / "kind").read_text() == OLD_KIND and done[0].startswith(f"left {host['dns'] / 'kind'}")
    with pytest.raises(netavark.ForeignDnsConfigError):  # not in the ledger any more: the user decides
        HostChanges.record(host["nets"], host["modules"], host["run"])


def test_aardvark_is_only_considered_once_our_own_config_went(host: dict[str, Path],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[Path] = []
    monkeypatch.setattr(netavark, "stop_idle_aardvark", lambda folder: asked.append(folder))
    host["dns"].mkdir(parents=True)
    (host["dns"] / "orphan").write_text("10.92.0.1\n")
    changes = HostChanges.record(host["nets"], host["modules"], host["run"])
    _kind_created(host)
    (host["dns"] / "orphan").unlink()  # its owner took it back: nothing of ours went, so aardvark is not ours
    changes.restore(host["modules"], host["run"])  # our network still lives
    assert asked == []
    (host["nets"] / "kind.json").unlink()
    changes.restore(host["modules"], host["run"])
    assert asked == [host["dns"]]


def test_stop_idle_aardvark_never_signals_a_process_that_is_not_aardvark_on_that_folder(tmp_path: Path) -> None:
    folder = netavark.dns_dir(tmp_path)
    folder.mkdir(parents=True)
    (folder / netavark.PID_FILE).write_text(str(os.getpid()))  # this test's own process: not aardvark-dns
    assert netavark.stop_idle_aardvark(folder) is None and (folder / netavark.PID_FILE).exists()
    (folder / "someones").write_text("10.93.0.1\n")
    assert netavark.stop_idle_aardvark(folder) is None


def test_the_run_folder_goes_path_by_path_only_when_all_of_it_is_ours(host: dict[str, Path]) -> None:
    changes = HostChanges.record(host["nets"], host["modules"], host["run"])
    _kind_created(host)
    (host["nets"] / "kind.json").unlink()
    (host["dns"] / "kind").unlink()  # netavark's teardown took its config
    (host["run"] / "storage").mkdir()  # a rootful podman's runroot, made meanwhile
    (host["run"] / "storage" / "overlay-containers").write_text("")
    done = changes.restore(host["modules"], host["run"])
    assert (host["run"] / "networks" / "ipam.db").exists() and (host["run"] / "storage" / "overlay-containers").exists()
    assert any("storage" in line and line.startswith(f"left {host['run']} as it is") for line in done), done
    assert not changes.made_run_dir and not host["ledger"].exists()  # someone else's now: never tried again

    (host["run"] / "storage" / "overlay-containers").unlink()
    (host["run"] / "storage").rmdir()
    (host["run"] / "networks" / "ipam.db").unlink()
    (host["run"] / "networks" / "aardvark.lock").unlink()
    host["dns"].rmdir()
    (host["run"] / "networks").rmdir()
    host["run"].rmdir()
    changes = HostChanges.record(host["nets"], host["modules"], host["run"])
    _kind_created(host)
    (host["nets"] / "kind.json").unlink()
    done = changes.restore(host["modules"], host["run"])
    assert not host["run"].exists(), done
    assert any(line.startswith(f"removed {host['run']} (") and "networks/ipam.db" in line for line in done), done


def test_a_symlinked_run_subfolder_is_not_followed(host: dict[str, Path], tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "ipam.db").write_text("keep")
    changes = HostChanges.record(host["nets"], host["modules"], host["run"])
    host["run"].mkdir()
    (host["run"] / "networks").symlink_to(elsewhere)
    done = changes.restore(host["modules"], host["run"])
    assert (elsewhere / "ipam.db").read_text() == "keep" and (host["run"] / "networks").is_symlink(), done
