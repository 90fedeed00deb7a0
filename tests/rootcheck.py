"""Tests that need root, and one clear stop when a session that selected them runs without it.

Real nodes (a kubelet with its own containerd and runc: mounts, network namespaces, a bridge) and Kueue
(a private mount namespace for its certificate) run only as root. Run without root, each of their
modules used to fail on its own, at its own fixture, minutes in. Instead, a test that needs root says
so with the ``root`` marker (registered in pyproject.toml; a module's ``pytestmark``), and a session
without root that selected any such test (or one using the ``real_cluster`` fixture, marked or not)
stops after collection, before anything runs, with one line naming their modules and what runs without
root. Nothing is skipped: a session as root (CI) runs them all, and ``-m "not root"`` leaves them out on
purpose.
"""

from __future__ import annotations

import os

import pytest

MARKER = "root"
#: fixtures that need root: a test that uses one needs root, marked or not
ROOT_FIXTURES = frozenset({"real_cluster"})
WHY = ("real nodes run a kubelet with its own containerd and runc (mounts, network namespaces, a bridge), "
       "Kueue runs in a private mount namespace")


def needs_root(item: pytest.Item) -> bool:
    """The test has the ``root`` marker or uses a fixture that needs root."""
    return item.get_closest_marker(MARKER) is not None or bool(
        ROOT_FIXTURES.intersection(getattr(item, "fixturenames", ())))


def refusal(items: list[pytest.Item], euid: int) -> str | None:
    """One line when ``items`` (the selected tests) hold tests needing root and ``euid`` is not root."""
    if euid == 0:
        return None
    needing = [item for item in items if needs_root(item)]
    if not needing:
        return None
    modules = sorted({item.nodeid.split("::")[0] for item in needing})
    return (f"{len(needing)} selected tests need root and this session runs as uid {euid} ({WHY}): "
            f"run them as root, or leave them out with -m 'not root'; `make unit` needs no root. "
            f"Modules: {', '.join(modules)}")


def pytest_collection_finish(session: pytest.Session) -> None:
    """After collection and ``-m`` selection, before the first test: stop a session without root that
    selected tests needing root (as a plugin, ``-p rootcheck``; conftest.py calls :func:`refusal` itself)."""
    why_not = refusal(session.items, os.geteuid())
    if why_not:
        raise pytest.UsageError(why_not)
