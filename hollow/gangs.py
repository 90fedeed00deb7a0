"""Gang barriers: a gang member's run clock starts once at least N members of its gang run.

Real multi-member training (a student and its teachers, N data-parallel workers) does no useful work
until every member runs; a member that started early holds its GPUs and waits.  The load generator
marks gang members with the label :data:`LABEL_GANG` (the group's name, unique in its namespace; the
members may belong to several Jobs) and the annotation :data:`ANN_GANG_MIN` (N).

The registry here follows every gang member bound to any node, also on other agents' nodes (agents
are sharded by node): the agent runs one more list+watch of pods, ``labelSelector=hollowscale.io/gang``
and ``fieldSelector=spec.nodeName!=`` (the apiserver filters, so pods without the label never reach
it and cost the agent nothing), whose events go to :meth:`GangRegistry.on_event`.  The registry is a
:class:`hollow.watching.WatchHandler` of its own; its relists forget only gang members.

The barrier rule (:func:`barrier_time`) reads only the pod objects, so a new agent process computes
the same barrier again:

* a member counts from ``status.startTime`` (written by the agent in the same patch that sets it
  Running; kept when the pod terminates or a container restarts in place) while it is Running, and
  until its containers' ``finishedAt`` once it is Succeeded or Failed;
* the barrier is the first moment at which at least N members count, i.e. the N-th smallest start
  time when no member failed before it.  A member that failed or was deleted before the barrier does
  not count: the others keep waiting (for a replacement), as a real job does; Kueue's
  ``waitForPodsReady`` or the Job's own timeouts act on that, not the agent.

When the pools have topology levels (:mod:`hollow.topology`), the registry also fixes, at the crossing,
the gang's *spread*: the smallest topology domain holding the nodes (``spec.nodeName``) of the members
that count at the barrier (those running at that moment), and the factor its run time stretches by.
It is a pure function of those pods and the pools document, so agents sharing a gang agree on it
(unless two members started in the same whole second and one agent saw the barrier crossed before the
other member existed: then that agent counts one member fewer).

Once crossed, a gang's barrier stays fixed for the life of the process (members that finish or are
deleted afterwards do not move it).  Times are the pod's whole-second timestamps, the same on every
agent.  Limitation: a new process recomputes the barrier from the members that still exist; if
members were deleted after the barrier while others still run, those others wait again for enough
running members.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from hollow.stages import ANN_GANG_MIN, LABEL_GANG, TERMINAL, parse_gang_min, parse_timestamp
from hollow.topology import NodeTopology, Spread

__all__ = ["ANN_GANG_MIN", "LABEL_GANG", "Gang", "GangKey", "GangRegistry", "Interval", "barrier_time",
           "counted_at", "member_interval", "parse_gang_min"]

log = logging.getLogger("hollow.gangs")

GangKey = tuple[str, str]  # (namespace, gang name)
#: (start, end) of a member's run, wall seconds; end None = still running
Interval = tuple[float, float | None]


def barrier_time(members: Iterable[Interval], n: int) -> float | None:
    """The first moment at which at least ``n`` members run, or None when there was none yet.

    A member runs over ``[start, end)`` (``end`` None = still running).  Sweep over the starts and
    ends in time order; at equal times ends come first (a member that ended at ``t`` does not run at
    ``t``), and only a start can raise the count, so the answer is always some member's start.
    """
    events: list[tuple[float, int]] = []
    for start, end in members:
        if end is not None and end <= start:
            continue  # never ran (or for no time at all)
        events.append((start, 1))
        if end is not None:
            events.append((end, -1))
    if len(events) < n:
        return None
    events.sort()  # (t, -1) sorts before (t, +1)
    running = 0
    for t, step in events:
        running += step
        if running >= n:
            return t
    return None


def member_interval(obj: dict[str, Any]) -> Interval | None:
    """The run interval of a member pod object, or None when it has not run (yet)."""
    status = obj.get("status") or {}
    phase = status.get("phase")
    if phase != "Running" and phase not in TERMINAL:
        return None
    statuses = status.get("containerStatuses") or ()
    state = ((statuses[0].get("state") or {}) if statuses else {})
    raw_start = status.get("startTime") or (state.get("running") or {}).get("startedAt") \
        or (state.get("terminated") or {}).get("startedAt")
    start = parse_timestamp(raw_start)
    if start is None:
        return None
    if phase == "Running":
        return start, None
    end = parse_timestamp((state.get("terminated") or {}).get("finishedAt"))
    return start, end if end is not None else start  # terminal without a finish time: never counted



@dataclass
class Gang:
    """What the registry knows of one gang.

    Attributes:
        members: uid -> run interval (None: not running yet) of every member seen.
        need: N, the largest gang-min among the members (they normally agree).
        barrier: wall seconds the barrier was crossed, or None while members wait.
        nodes: uid -> the node each member is bound to.
        spread: the spread fixed at the barrier (:mod:`hollow.topology`), or None (no topology levels,
            or not crossed yet).
    """

    members: dict[str, Interval | None] = field(default_factory=dict)
    need: int = 1
    barrier: float | None = None
    nodes: dict[str, str] = field(default_factory=dict)
    spread: Spread | None = None


def counted_at(members: dict[str, Interval | None], barrier: float) -> list[str]:
    """The members that run at the barrier (start <= barrier < end): those whose placement counts."""
    return [uid for uid, iv in members.items()
            if iv is not None and iv[0] <= barrier and (iv[1] is None or iv[1] > barrier)]


class GangRegistry:
    """Gang members on all nodes, fed with the pod watch's events for pods with :data:`LABEL_GANG`.

    ``on_crossed(key, barrier, uids)`` is called (synchronously, from the event) when a gang crosses
    its barrier; the controller then plans the members it runs again.  ``topology`` (all the pools)
    gives each crossed gang its :class:`hollow.topology.Spread`; None: no spread.
    """

    def __init__(self, on_crossed: Callable[[GangKey, float, list[str]], None] | None = None,
                 topology: NodeTopology | None = None) -> None:
        self.on_crossed = on_crossed
        self.topology = topology
        self.gangs: dict[GangKey, Gang] = {}
        self._key_of: dict[str, GangKey] = {}

    def barrier(self, namespace: str, gang: str) -> float | None:
        """The gang's barrier time (wall seconds), or None while it is not crossed."""
        g = self.gangs.get((namespace, gang))
        return g.barrier if g is not None else None

    def spread(self, namespace: str, gang: str) -> Spread | None:
        """The gang's spread fixed at its barrier, or None (not crossed, or no topology levels)."""
        g = self.gangs.get((namespace, gang))
        return g.spread if g is not None else None

    def on_event(self, kind: str, obj: dict[str, Any]) -> None:
        """One event of the gang watch: a pod that carries :data:`LABEL_GANG` (DELETED also when it lost it)."""
        meta = obj.get("metadata") or {}
        uid = meta.get("uid", "")
        name = (meta.get("labels") or {}).get(LABEL_GANG)
        need = parse_gang_min((meta.get("annotations") or {}).get(ANN_GANG_MIN))
        if kind == "DELETED" or not name or need is None:
            self.forget(uid)
            return
        key = (meta.get("namespace", ""), name)
        old = self._key_of.get(uid)
        if old is not None and old != key:  # relabelled: not seen in practice, kept consistent anyway
            self.forget(uid)
        g = self.gangs.get(key)
        if g is None:
            g = self.gangs[key] = Gang(need=need)
        elif need > g.need:
            if g.barrier is None:
                log.warning("gang %s/%s: members disagree on %s; using the largest, %d",
                            key[0], key[1], ANN_GANG_MIN, need)
            g.need = need
        self._key_of[uid] = key
        node = (obj.get("spec") or {}).get("nodeName")
        if node:
            g.nodes[uid] = node
        interval = member_interval(obj)
        if g.members.get(uid, False) == interval:
            return  # nothing that matters changed (or the barrier is fixed and this is just news)
        g.members[uid] = interval
        if g.barrier is None and interval is not None:
            barrier = barrier_time((m for m in g.members.values() if m is not None), g.need)
            if barrier is not None:
                g.barrier = barrier
                if self.topology is not None:
                    g.spread = self.topology.gang_spread(
                        sorted(g.nodes.get(u, "") for u in counted_at(g.members, barrier)))
                log.debug("gang %s/%s: %d members run since %s", key[0], key[1], g.need, barrier)
                if self.on_crossed is not None:
                    self.on_crossed(key, barrier, list(g.members))

    def forget(self, uid: str) -> None:
        """A member is gone (deleted, or no longer labelled)."""
        key = self._key_of.pop(uid, None)
        if key is None:
            return
        g = self.gangs.get(key)
        if g is not None:
            g.members.pop(uid, None)
            g.nodes.pop(uid, None)
            if not g.members:
                del self.gangs[key]

    def on_relisted(self, uids: set[str]) -> None:
        """Forget members deleted while the watch was down."""
        for uid in [u for u in self._key_of if u not in uids]:
            self.forget(uid)

    def __len__(self) -> int:
        return len(self._key_of)
