"""Compare the pod statuses a real kubelet and a hollow node publish for the same pod spec.

Input: for each side, the successive ``status`` objects of one pod as a watch delivered them (raw
JSON, oldest first).  Output: a list of differences in words (empty: the two agree), on

- **field set**: the union of field paths (``status.containerStatuses[].state.running.startedAt``;
  list items are ``[]``, null and empty values count as absent, resource maps are leaves), minus the
  paths docs/hollow-fidelity.md lists as deliberately left out (:func:`left_out_paths`);
- **conditions**: every (phase, condition type, status, reason) seen, and the final condition types;
- **container state shape**: every (phase, state, reason, exit code, ready, started) seen;
- **timing order**: for each pair of milestones (phase first seen, condition first True or False,
  container state first seen) the order of the first snapshots showing them must agree; two
  milestones in one snapshot are a tie, and a tie on one side against a strict order on the other
  is a difference too (a hollow node that writes Ready with Running, where the kubelet writes them
  one after the other, is the fidelity gap this catches).

Two entries of docs/hollow-fidelity.md name kubelet writes rather than fields (:data:`STATE_ENTRIES`); the snapshots
they describe are dropped from the real side before comparing: ``status (phase Pending)`` (the
kubelet writes one or two statuses before the containers run, the hollow node goes from the
scheduler's Pending straight to Running) and ``status (phase Running, containers terminated)`` (the
kubelet reports the containers terminated and the pod not ready while the phase stays Running until
the sandbox is torn down, then writes the terminal phase; the hollow node writes the end state at
once).  The same snapshots are dropped from the hollow side too, where they can only be the
scheduler's Pending.

Pure functions (no API access): the differential integration test feeds them from watches, the
unit tests from recorded documents.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

#: fields whose keys are data (resource names), not schema: compared as one leaf
MAP_LEAVES = frozenset({"resources", "allocatedResources"})
#: the subsection of docs/hollow-fidelity.md that lists what hollow nodes leave out (the allow-list of the comparison)
LEFT_OUT_HEADING = "Hollow-node fidelity: what is deliberately left out"
#: the docs/hollow-fidelity.md entry that stands for the kubelet's writes before the containers run
PENDING_ENTRY = "status (phase Pending)"
#: the docs/hollow-fidelity.md entry that stands for the kubelet's write of terminated containers before the terminal phase
TERMINATING_ENTRY = "status (phase Running, containers terminated)"

Status = dict[str, Any]


def field_paths(doc: Any, prefix: str = "status") -> set[str]:
    """Every leaf path of ``doc``; lists as ``[]``; None, {} and [] are absent (the API's omitempty)."""
    out: set[str] = set()
    if doc is None or doc == {} or doc == []:
        return out
    if isinstance(doc, dict):
        for key, value in doc.items():
            path = f"{prefix}.{key}"
            if key in MAP_LEAVES and isinstance(value, dict):
                if value:
                    out.add(path)
                continue
            out |= field_paths(value, path)
        return out
    if isinstance(doc, list):
        for item in doc:
            out |= field_paths(item, prefix + "[]")
        return out
    out.add(prefix)
    return out


def left_out_paths(readme: str) -> tuple[str, ...]:
    """The entries of the left-out table of ``readme`` (the text of docs/hollow-fidelity.md): the backticked first cell of each row.

    Raises:
        ValueError: the subsection or its table is missing (the allow-list must come from docs/hollow-fidelity.md).
    """
    lines = readme.splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.lstrip("#").strip() == LEFT_OUT_HEADING)
    except StopIteration:
        raise ValueError(f"docs/hollow-fidelity.md: expected a heading {LEFT_OUT_HEADING!r}, found none") from None
    entries: list[str] = []
    for line in lines[start + 1:]:
        if line.startswith("#"):
            break
        m = re.match(r"^\|\s*`([^`]+)`", line)
        if m:
            entries.append(m.group(1))
    if not entries:
        raise ValueError(f"docs/hollow-fidelity.md: the subsection {LEFT_OUT_HEADING!r} has no table rows with a `path`")
    return tuple(entries)


def _allowed(path: str, allowed: Iterable[str]) -> bool:
    """``path`` is an allow-listed path or lies under one."""
    return any(path == a or path.startswith(a + ".") or path.startswith(a + "[]") for a in allowed)


def _pending(status: Status) -> bool:
    return (status.get("phase") or "Pending") == "Pending"


def _terminating(status: Status) -> bool:
    containers = status.get("containerStatuses") or ()
    return status.get("phase") == "Running" and bool(containers) and all(
        (c.get("state") or {}).get("terminated") for c in containers)


#: docs/hollow-fidelity.md entries that name a kind of status write (a predicate on a snapshot) rather than a field
STATE_ENTRIES = {PENDING_ENTRY: _pending, TERMINATING_ENTRY: _terminating}


def _snapshots(statuses: Sequence[Status], drop: Sequence[str]) -> list[Status]:
    tests = [STATE_ENTRIES[e] for e in drop]
    return [s for s in statuses if not any(t(s) for t in tests)]


def condition_states(statuses: Sequence[Status]) -> set[tuple[str, str, str, str]]:
    """Every (phase, type, status, reason) seen."""
    return {(s.get("phase") or "Pending", c.get("type", ""), c.get("status", ""), c.get("reason") or "")
            for s in statuses for c in s.get("conditions") or ()}


def _container_shape(phase: str, cs: dict[str, Any]) -> tuple[str, str, str, str, bool, bool]:
    state = {k: v for k, v in (cs.get("state") or {}).items() if v is not None}
    kind = next(iter(state), "")
    detail = state.get(kind) or {}
    code = detail.get("exitCode")
    return (phase, kind, detail.get("reason") or "", "" if code is None else str(code),
            bool(cs.get("ready")), bool(cs.get("started")))


def container_shapes(statuses: Sequence[Status]) -> set[tuple[str, str, str, str, bool, bool]]:
    """Every (phase, state, reason, exit code, ready, started) of the app containers seen."""
    return {_container_shape(s.get("phase") or "Pending", cs)
            for s in statuses for cs in s.get("containerStatuses") or ()}


def milestones(statuses: Sequence[Status]) -> dict[str, int]:
    """Index of the first snapshot showing each milestone (``phase=Running``, ``Ready=True``, ``state=running``)."""
    first: dict[str, int] = {}
    for i, s in enumerate(statuses):
        names = [f"phase={s.get('phase') or 'Pending'}"]
        names += [f"{c.get('type')}={c.get('status')}" for c in s.get("conditions") or ()]
        for cs in s.get("containerStatuses") or ():
            names += [f"state={k}" for k, v in (cs.get("state") or {}).items() if v is not None]
        for name in names:
            first.setdefault(name, i)
    return first


def _relation(a: int, b: int) -> str:
    return "<" if a < b else ">" if a > b else "="


@dataclass(frozen=True)
class Comparison:
    """What differs between the two sides (empty lists: they agree)."""

    only_real: tuple[str, ...]
    only_hollow: tuple[str, ...]
    problems: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not (self.only_real or self.only_hollow or self.problems)

    def describe(self) -> str:
        """All differences, one per line, for an assertion message."""
        lines = [f"field only on the real node: {p}" for p in self.only_real]
        lines += [f"field only on the hollow node: {p}" for p in self.only_hollow]
        return "\n".join(lines + list(self.problems))


def compare(real: Sequence[Status], hollow: Sequence[Status], left_out: Sequence[str]) -> Comparison:
    """Compare two status timelines of the same pod spec (see the module doc)."""
    if not real or not hollow:
        raise ValueError(f"expected statuses from both nodes, got {len(real)} real and {len(hollow)} hollow")
    drop = [e for e in left_out if e in STATE_ENTRIES]
    paths = [e for e in left_out if e not in STATE_ENTRIES]
    odd = [e for e in paths if not e.startswith("status.")]
    if odd:
        raise ValueError(f"left-out entries: expected status field paths (status.x.y) or one of "
                         f"{sorted(STATE_ENTRIES)}, got {odd}")
    r, h = _snapshots(real, drop), _snapshots(hollow, drop)
    if not r or not h:
        raise ValueError(f"nothing left to compare once the left-out writes are dropped ({len(r)} real and "
                         f"{len(h)} hollow statuses)")
    r_paths = set().union(*(field_paths(s) for s in r))
    h_paths = set().union(*(field_paths(s) for s in h))
    only_real = tuple(sorted(p for p in r_paths - h_paths if not _allowed(p, paths)))
    only_hollow = tuple(sorted(p for p in h_paths - r_paths if not _allowed(p, paths)))
    problems: list[str] = []
    for what, fn in (("condition (phase, type, status, reason)", condition_states),
                     ("container (phase, state, reason, exit code, ready, started)", container_shapes)):
        rs, hs = fn(r), fn(h)
        problems += [f"{what} only on the real node: {x}" for x in sorted(rs - hs)]
        problems += [f"{what} only on the hollow node: {x}" for x in sorted(hs - rs)]
    r_final = {c.get("type") for c in real[-1].get("conditions") or ()}
    h_final = {c.get("type") for c in hollow[-1].get("conditions") or ()}
    if r_final != h_final:
        problems.append(f"final condition types differ: real {sorted(map(str, r_final))}, "
                        f"hollow {sorted(map(str, h_final))}")
    rm, hm = milestones(r), milestones(h)
    for a, b in combinations(sorted(set(rm) & set(hm)), 2):
        rr, hr = _relation(rm[a], rm[b]), _relation(hm[a], hm[b])
        if rr != hr:
            problems.append(f"order: real {a} {rr} {b}, hollow {a} {hr} {b}")
    return Comparison(only_real, only_hollow, tuple(problems))
