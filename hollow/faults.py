"""Faults a scenario can inject: heartbeat loss on a share of nodes, and pod failures.

Heartbeat loss
    ``fraction`` of this agent's nodes (chosen by ``seed``, the same choice every time) stop renewing
    their Leases and posting node status for ``duration_s``; pods on them also freeze, as on a
    partitioned kubelet.  The real controller-manager then marks them NotReady/Unknown after its grace
    period, taints them and evicts.  When the window ends, the nodes post Ready status and renew at once.

Node lost
    The named nodes of this agent stop renewing their Leases and posting status (their pods freeze), as a
    machine that died; ``delete_after_s`` later the agent deletes their Node objects (a cloud provider's
    node lifecycle does; the pod garbage collector then deletes their pods), and does not register them
    again while they are lost.  ``repair_after_s`` after the loss (if given) they register again, Ready, as
    a repaired or replaced machine.

Pod failures (chosen semantics)
    ``fraction`` of the pods *running now* on this agent's nodes (chosen by ``seed``) crash at once with
    ``exit_code``; and for ``duration_s`` every pod that reaches the end of its run fails with
    ``exit_code`` with probability ``fraction`` instead of its planned exit.  What a crash means follows
    the restart policy: Never -> the pod Fails; OnFailure/Always -> the container restarts in place
    (restartCount + 1), as the kubelet would.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from kubecore.distributions import keyed_uniform


def choose(items: list[str], fraction: float, seed: int) -> list[str]:
    """A deterministic ``round(fraction * len(items))`` sample of ``items`` (sorted first)."""
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"expected a fraction from 0 to 1, got {fraction!r}")
    pool = sorted(items)
    k = round(fraction * len(pool))
    return sorted(random.Random(seed).sample(pool, k))


@dataclass
class PodFailureWindow:
    """Pods finishing before ``until`` (monotonic seconds) fail with ``exit_code`` with probability ``fraction``."""

    fraction: float
    exit_code: int
    until: float
    seed: int


@dataclass
class FaultState:
    """Active faults of one agent (monotonic deadlines)."""

    heartbeat_stopped: dict[str, float] = field(default_factory=dict)
    pod_window: PodFailureWindow | None = None
    #: lost nodes (monotonic time of their repair, ``inf``: never): not registered again while lost
    lost: dict[str, float] = field(default_factory=dict)

    def is_lost(self, node: str) -> bool:
        """True while ``node`` is lost (deleted, and not to be registered again yet)."""
        return node in self.lost

    def stopped(self, node: str, now: float) -> bool:
        """True while ``node``'s heartbeats are stopped."""
        until = self.heartbeat_stopped.get(node)
        return until is not None and now < until

    def stop_heartbeats(self, nodes: list[str], until: float) -> None:
        """Stop ``nodes`` until ``until`` (extends an active stop, never shortens it)."""
        for name in nodes:
            self.heartbeat_stopped[name] = max(until, self.heartbeat_stopped.get(name, 0.0))

    def recovered(self, now: float) -> list[str]:
        """Remove and return the nodes whose stop ended by ``now``."""
        done = [n for n, until in self.heartbeat_stopped.items() if until <= now]
        for name in done:
            del self.heartbeat_stopped[name]
        return done

    def exit_override(self, uid: str, now: float) -> int | None:
        """The exit code a pod finishing now must use because of a pod-failure window, or None."""
        w = self.pod_window
        if w is None or now >= w.until:
            return None
        if keyed_uniform(uid, "fault", str(w.seed)) < w.fraction:
            return w.exit_code
        return None
