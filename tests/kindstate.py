"""The machine's state around a kind cluster the harness makes in its own podman: that none runs yet, and that
nothing of it is left afterwards (containers, volumes, its network and DNS, the firewall, network namespaces
and links as before).  Shared by the kind end-to-end tests."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from hollowscale.kindnode import firewall, netavark
from hollowscale.kindnode.engine import Podman, ensure_podman

WORKERS = ("hollowscale-worker", "hollowscale-worker2")


def no_cluster_yet() -> Podman:
    podman = ensure_podman()
    if podman.run(["container", "exists", "hollowscale-control-plane"], check=False).returncode == 0:
        pytest.fail("a kind cluster named hollowscale already runs in hollowscale's podman: the run would reuse "
                    "it, and this test checks a cluster the run creates", pytrace=False)
    return podman


def network_state() -> tuple[set[str], set[str]]:
    """The machine's network namespaces (``/run/netns``) and links: a node killed before its teardown
    leaves both (its namespace, its veth and the network's bridge)."""
    netns = {p.name for p in Path("/run/netns").iterdir()} if Path("/run/netns").is_dir() else set()
    links = {line.split(":")[1].strip().split("@")[0] for line in subprocess.run(
        ["ip", "-o", "link"], capture_output=True, text=True, check=True).stdout.splitlines()}
    return netns, links


def assert_nothing_left(podman: Podman, fw_before: dict[str, firewall.Rules], modules_before: bool,
                         net_before: tuple[set[str], set[str]]) -> None:
    """No node container, no volume, no kind network, no DNS config of one nor a ledger entry for it, the
    firewall, /lib/modules, the network namespaces and links as before."""
    assert not podman.run(["ps", "--all", "--quiet"]).stdout.strip()
    assert not podman.run(["volume", "ls", "--quiet"]).stdout.strip()
    assert podman.run(["network", "exists", "kind"], check=False).returncode != 0
    assert not (netavark.dns_dir() / "kind").exists()
    assert not netavark.ledger_path(podman.networks_dir).exists()  # every entry done with
    assert {t: r.chains for t, r in firewall.snapshot().items()} == {t: r.chains for t, r in fw_before.items()}
    assert Path("/lib/modules").exists() == modules_before
    assert network_state() == net_before
