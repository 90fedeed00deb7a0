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

Attempts and checkpoints (a training job through failures).  A crossed barrier starts an *attempt*; it
lasts while at least N members run.  It ends in one of two ways, read from the member whose end made the
count drop below N:

* it Succeeded: the gang *completed*; its barrier stays fixed for the life of the process (members that
  finish or are deleted afterwards do not move it);
* it failed, or it was deleted (a pod being deleted stops counting at its ``deletionTimestamp``: a node
  drained or lost, a JobSet recreating its Jobs, Kueue evicting): the attempt *broke*.  The work done in
  it is its length divided by the spread factor; of that, the job keeps what its last checkpoint saved
  (annotation :data:`ANN_CHECKPOINT`, seconds of work between checkpoints: ``floor(work / C) * C``;
  nothing without the annotation, as a job that never checkpoints restarts from the start).  The barrier
  is cleared (running members wait again, holding their GPUs) and the next one is the first moment after
  the break at which N members run again: the replacements (per-index), or a whole new set of pods
  (JobSet's Recreate; the gang's record, with its saved work, outlives its members for that).

Every member's run then lasts the remaining work, ``(run duration - saved) * factor``, from the current
attempt's barrier (:func:`hollow.stages.plan`'s ``work_done``).  In-place container restarts
(restartPolicy OnFailure) keep the pod Running and do not break an attempt.

Times are the pod's whole-second timestamps, the same on every agent.  Limitation: a new process
recomputes the barrier from the members that still exist, and knows nothing of attempts before it
started; if members were deleted after the barrier while others still run, those others wait again for
enough running members.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from hollow.stages import ANN_CHECKPOINT, ANN_GANG_MIN, LABEL_GANG, TERMINAL, parse_gang_min, parse_timestamp
from hollow.topology import NodeTopology, Spread

__all__ = ["ANN_CHECKPOINT", "ANN_GANG_MIN", "LABEL_GANG", "Gang", "GangKey", "GangRegistry", "Interval",
           "barrier_time", "counted_at", "first_drop", "lost_work", "member_interval", "parse_checkpoint", "parse_gang_min",
           "saved_work"]

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


def first_drop(members: dict[str, Interval | None], n: int, since: float) -> tuple[float, list[str]] | None:
    """The first moment after ``since`` at which fewer than ``n`` members run, with the members whose end
    made it so; None while at least ``n`` still run (an attempt that has not ended yet).

    A member counts over ``[max(start, since), end)``; ends at equal times are taken together.
    """
    ends: dict[float, list[str]] = {}
    steps: list[tuple[float, int]] = []
    for uid, iv in members.items():
        if iv is None or (iv[1] is not None and iv[1] <= since):
            continue
        steps.append((max(iv[0], since), 1))
        if iv[1] is not None:
            steps.append((iv[1], -1))
            ends.setdefault(iv[1], []).append(uid)
    steps.sort()  # (t, -1) before (t, +1)
    running = 0
    for t, step in steps:
        running += step
        if step < 0 and running < n:
            return t, sorted(ends[t])
    return None


def lost_work(work_s: float, checkpoint_s: float | None) -> float:
    """Seconds of work after the last checkpoint of an attempt that did ``work_s``: they are done again.

    Checkpoints fall every ``checkpoint_s`` seconds of work from the attempt's start; None (or not positive)
    means the job never checkpoints and loses everything.  A remainder within float noise of a whole
    interval (``0.3 % 0.1``) counts as a checkpoint just taken.  (The run's figures,
    :mod:`hollowscale.training.recovery`, use this same rule.)
    """
    if checkpoint_s is None or checkpoint_s <= 0:
        return max(0.0, work_s)
    rest = math.fmod(max(0.0, work_s), checkpoint_s)
    return 0.0 if math.isclose(rest, checkpoint_s, rel_tol=1e-9, abs_tol=1e-9) else rest


def saved_work(work_s: float, checkpoint_s: float | None) -> float:
    """What an attempt that did ``work_s`` seconds of work leaves saved: its last checkpoint (nothing without
    checkpoints)."""
    return max(0.0, work_s) - lost_work(work_s, checkpoint_s)


def parse_checkpoint(raw: str | None) -> float | None:
    """The annotation :data:`ANN_CHECKPOINT`: seconds of work between checkpoints (> 0), or None."""
    try:
        value = float(raw) if raw is not None else None
    except ValueError:
        return None
    return value if value is not None and value > 0 and value != float("inf") else None


def member_interval(obj: dict[str, Any]) -> Interval | None:
    """The run interval of a member pod object, or None when it has not run (yet).  A Running pod being
    deleted stops counting at its ``deletionTimestamp`` (its containers are being stopped)."""
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
        deleting = parse_timestamp((obj.get("metadata") or {}).get("deletionTimestamp"))
        return start, (max(deleting, start) if deleting is not None else None)
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
        succeeded: the members that ended Succeeded (an attempt they end completed; any other end broke it).
        checkpoint_s: seconds of work between checkpoints (:data:`ANN_CHECKPOINT`), or None.
        saved_s: work saved at checkpoints by the broken attempts (seconds, unstretched).
        attempts: barriers crossed; broken_at: when the last attempt broke (the next barrier counts from
            there); completed: an attempt ended in success (the barrier then stays).
    """

    members: dict[str, Interval | None] = field(default_factory=dict)
    need: int = 1
    barrier: float | None = None
    nodes: dict[str, str] = field(default_factory=dict)
    spread: Spread | None = None
    succeeded: set[str] = field(default_factory=set)
    checkpoint_s: float | None = None
    saved_s: float = 0.0
    attempts: int = 0
    broken_at: float | None = None
    completed: bool = False


def counted_at(members: dict[str, Interval | None], barrier: float) -> list[str]:
    """The members that run at the barrier (start <= barrier < end): those whose placement counts."""
    return [uid for uid, iv in members.items()
            if iv is not None and iv[0] <= barrier and (iv[1] is None or iv[1] > barrier)]


class GangRegistry:
    """Gang members on all nodes, fed with the pod watch's events for pods with :data:`LABEL_GANG`.

    ``on_crossed(key, barrier, uids)`` is called (synchronously, from the event) when a gang crosses
    its barrier, and with ``barrier`` None when an attempt breaks; the controller then plans the members
    it runs again.  ``topology`` (all the pools) gives each crossed gang its :class:`hollow.topology.Spread`;
    None: no spread.  ``wall``: the time a member deleted without a ``deletionTimestamp`` ended.
    """

    def __init__(self, on_crossed: Callable[[GangKey, float | None, list[str]], None] | None = None,
                 topology: NodeTopology | None = None, wall: Callable[[], float] = time.time) -> None:
        self.on_crossed = on_crossed
        self.topology = topology
        self.wall = wall
        self.gangs: dict[GangKey, Gang] = {}
        self._key_of: dict[str, GangKey] = {}

    def work_done(self, namespace: str, gang: str) -> float:
        """The work (seconds, unstretched) the gang's checkpoints saved before its current attempt."""
        g = self.gangs.get((namespace, gang))
        return g.saved_s if g is not None else 0.0

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
            self.forget(uid, obj if kind == "DELETED" else None)
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
        if g.checkpoint_s is None:
            g.checkpoint_s = parse_checkpoint((meta.get("annotations") or {}).get(ANN_CHECKPOINT))
        node = (obj.get("spec") or {}).get("nodeName")
        if node:
            g.nodes[uid] = node
        interval = member_interval(obj)
        if (obj.get("status") or {}).get("phase") == "Succeeded":
            g.succeeded.add(uid)
        if g.members.get(uid, False) == interval:
            return  # nothing that matters changed (or the barrier is fixed and this is just news)
        g.members[uid] = interval
        self._advance(key, g)

    def _advance(self, key: GangKey, g: Gang) -> None:
        """After a member changed: end the current attempt if it ended, then cross the next barrier if due."""
        if g.completed:
            return
        if g.barrier is not None:
            drop = first_drop(g.members, g.need, g.barrier)
            if drop is None:
                return
            at, ended = drop
            if any(uid in g.succeeded for uid in ended):
                g.completed = True
                return
            factor = g.spread.factor if g.spread is not None else 1.0
            g.saved_s += saved_work((at - g.barrier) / factor, g.checkpoint_s)
            log.debug("gang %s/%s: attempt %d broke at %s (%s); %.0fs of work saved", key[0], key[1], g.attempts,
                      at, ",".join(ended), g.saved_s)
            g.barrier, g.spread, g.broken_at = None, None, at
            if self.on_crossed is not None:
                self.on_crossed(key, None, list(g.members))
        since = g.broken_at if g.broken_at is not None else float("-inf")
        running = [(max(iv[0], since), iv[1]) for iv in g.members.values()
                   if iv is not None and (iv[1] is None or iv[1] > since)]
        barrier = barrier_time(running, g.need)
        if barrier is None:
            return
        g.barrier = barrier
        g.attempts += 1
        if self.topology is not None:
            g.spread = self.topology.gang_spread(
                sorted(g.nodes.get(u, "") for u in counted_at(g.members, barrier)))
        log.debug("gang %s/%s: %d members run since %s", key[0], key[1], g.need, barrier)
        if self.on_crossed is not None:
            self.on_crossed(key, barrier, list(g.members))
        self._advance(key, g)  # a member of the new attempt may have ended already (events seen late)

    def forget(self, uid: str, obj: dict[str, Any] | None = None) -> None:
        """A member is gone (deleted, or no longer labelled); ``obj``: its last state, when deleted.

        A member deleted while it ran ends at its ``deletionTimestamp`` (else now), which may break the
        attempt.  A gang whose members are all gone is forgotten unless an attempt of it broke and it
        has not completed: its replacements (a JobSet's recreated Jobs) resume from its saved work.
        """
        key = self._key_of.pop(uid, None)
        if key is None:
            return
        g = self.gangs.get(key)
        if g is None:
            return
        iv = g.members.get(uid)
        if g.barrier is not None and not g.completed and iv is not None and iv[1] is None:
            meta = (obj or {}).get("metadata") or {}
            end = parse_timestamp(meta.get("deletionTimestamp"))
            g.members[uid] = (iv[0], max(iv[0], end if end is not None else self.wall()))
            self._advance(key, g)
        g.members.pop(uid, None)
        g.nodes.pop(uid, None)
        g.succeeded.discard(uid)
        if not g.members and (g.completed or g.attempts == 0 or g.barrier is not None):
            del self.gangs[key]

    def on_relisted(self, uids: set[str]) -> None:
        """Forget members deleted while the watch was down."""
        for uid in [u for u in self._key_of if u not in uids]:
            self.forget(uid)

    def __len__(self) -> int:
        return len(self._key_of)
