"""Put the machine's iptables back as they were before a kind cluster's network came and went.

Podman's network backend (netavark) adds chains of its own to the host's iptables and ip6tables the
first time a network with containers comes up (``NETAVARK_FORWARD``, ``NETAVARK-HOSTPORT-*``, with jumps
from ``FORWARD``, ``PREROUTING``, ``OUTPUT`` and ``POSTROUTING``) and never removes them, not even when
the network is removed (the CNI backend leaves ``CNI-*`` chains the same way).  The harness must not
leave behind what it made, nor touch what it did not: :func:`snapshot` reads the chains before the
cluster, :func:`cleanup_commands` lists, from the state after, the jumps into and the chains that the
backend made since (those with its prefixes that were not there before), and :func:`restore` runs them.
A chain that was there before, someone else's podman's included, is left alone.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass

#: the chains podman's network backends make
PREFIXES = ("NETAVARK", "CNI-")
TOOLS = ("iptables", "ip6tables")


@dataclass(frozen=True)
class Rules:
    """One ``<tool>-save`` output: per table, its chains and its rules (each an argument list, ``-A`` first)."""

    chains: Mapping[str, frozenset[str]]
    rules: Mapping[str, tuple[tuple[str, ...], ...]]


def parse_save(text: str) -> Rules:
    """Read ``iptables-save`` output (comments and counters ignored)."""
    chains: dict[str, set[str]] = {}
    rules: dict[str, list[tuple[str, ...]]] = {}
    table = ""
    for line in text.splitlines():
        if line.startswith("*"):
            table = line[1:].strip()
            chains.setdefault(table, set())
            rules.setdefault(table, [])
        elif line.startswith(":") and table:
            chains[table].add(line[1:].split()[0])
        elif line.startswith("-A ") and table:
            rules[table].append(tuple(shlex.split(line)))
    return Rules({t: frozenset(c) for t, c in chains.items()}, {t: tuple(r) for t, r in rules.items()})


def cleanup_commands(before: Rules, after: Rules, prefixes: tuple[str, ...] = PREFIXES) -> list[list[str]]:
    """The arguments of the ``iptables`` calls that remove what appeared since ``before``: first every rule
    of an older chain that jumps into a new one, then each new chain flushed, then each deleted."""
    commands: list[list[str]] = []
    for table, chains in after.chains.items():
        new = sorted(c for c in chains - before.chains.get(table, frozenset()) if c.startswith(prefixes))
        if not new:
            continue
        for rule in after.rules.get(table, ()):
            chain, target = rule[1], rule[rule.index("-j") + 1] if "-j" in rule else ""
            if chain not in new and target in new:
                commands.append(["-t", table, "-D", *rule[1:]])
        commands += [["-t", table, "-F", c] for c in new]
        commands += [["-t", table, "-X", c] for c in new]
    return commands


def _save(tool: str) -> str | None:
    binary = shutil.which(f"{tool}-save")
    if binary is None:
        return None
    proc = subprocess.run([binary], capture_output=True, text=True, timeout=60, check=False)
    return proc.stdout if proc.returncode == 0 else None


def snapshot() -> dict[str, Rules]:
    """The chains and rules of iptables and ip6tables now (a tool that is missing or fails is left out)."""
    out: dict[str, Rules] = {}
    for tool in TOOLS:
        text = _save(tool)
        if text is not None:
            out[tool] = parse_save(text)
    return out


def restore(before: Mapping[str, Rules]) -> list[str]:
    """Remove what podman's network backend added since ``before`` (module docstring); what was done, as
    command lines, and a line for each call that failed."""
    done: list[str] = []
    for tool, rules_before in before.items():
        text = _save(tool)
        if text is None:
            continue
        for args in cleanup_commands(rules_before, parse_save(text)):
            proc = subprocess.run([tool, *args], capture_output=True, text=True, timeout=60, check=False)
            line = shlex.join([tool, *args])
            done.append(line if proc.returncode == 0 else f"{line}: failed ({proc.stderr.strip()[-200:]})")
    return done


__all__ = ["PREFIXES", "Rules", "cleanup_commands", "parse_save", "restore", "snapshot"]
