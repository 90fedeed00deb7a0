"""Agent settings as dataclasses; every field documents its unit.

All heartbeat intervals move together with one ``factor`` (kubelet cadence at 1.0): a scale test that
only cares about scheduling can halve the agent's request rate with factor 2 without touching each
interval, and a quick test can speed NotReady detection up with factor < 1.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hollow.api import ApiSettings
from hollow.nodebody import NodeIdentity
from hollow.sharding import Shard
from hollow.watching import WatchSettings


@dataclass(frozen=True)
class HeartbeatSettings:
    """Node heartbeats at kubelet cadence, scaled by ``factor``.

    Attributes:
        factor: multiplies every interval below (1.0 = kubelet defaults).
        lease_duration_s: Lease ``leaseDurationSeconds`` before scaling, seconds (kubelet: 40).
        renew_fraction: renew every ``lease_duration * renew_fraction`` (kubelet: 1/4).
        renew_jitter: extra delay per renewal, up to this fraction of the interval (kubelet: 0.04);
            it never accumulates, so renewals stay evenly spread over time.
        status_interval_s: node status refresh period before scaling, seconds (kubelet: 300).
        node_monitor_grace_s: the controller-manager's grace period, seconds (not scaled); used to warn
            when renewals lag towards it and to re-post Ready after a gap longer than a good part of it.
    """

    factor: float = 1.0
    lease_duration_s: float = 40.0
    renew_fraction: float = 0.25
    renew_jitter: float = 0.04
    status_interval_s: float = 300.0
    node_monitor_grace_s: float = 50.0

    @property
    def lease_s(self) -> int:
        """Effective lease duration, whole seconds (>= 1)."""
        return max(1, round(self.lease_duration_s * self.factor))

    @property
    def renew_s(self) -> float:
        """Effective renew interval, seconds."""
        return self.lease_s * self.renew_fraction

    @property
    def status_s(self) -> float:
        """Effective status refresh interval, seconds."""
        return self.status_interval_s * self.factor


@dataclass(frozen=True)
class MonitorSettings:
    """Self-monitoring thresholds (the agent warns, Locust-style, when it is the bottleneck).

    Attributes:
        interval_s: seconds between checks.
        loop_lag_warn_s: event-loop lag that triggers a warning, seconds.
        renew_lag_warn_s: lease renew lag p99 (over the last interval) that triggers a warning, seconds.
        backlog_warn: actions past their deadline (or waiting for the concurrency bound) that trigger a
            warning when the number also grew since the last check.
        cpu_warn: process CPU share of one core that triggers a warning (0..1).
    """

    interval_s: float = 5.0
    loop_lag_warn_s: float = 0.2
    renew_lag_warn_s: float = 2.0
    backlog_warn: int = 1000
    cpu_warn: float = 0.9


@dataclass(frozen=True)
class AgentSettings:
    """Everything one agent process needs besides the pools.

    Attributes:
        shard: which part of the pools this process owns.
        heartbeat: lease and status cadence.
        api: transport (concurrency bound, retries).
        watch: list/watch tuning.
        identity: nodeInfo strings.
        monitor: self-monitoring thresholds.
        delete_nodes_on_exit: delete this agent's Nodes and Leases on graceful shutdown.
        metrics_host: address of the metrics/control server (loopback by default).
        metrics_port: port of that server, 0 = pick a free one.
        gang_barrier: gang members (label ``hollowscale.io/gang`` + annotation ``hollowscale.io/gang-min:
            "N"``) hold their resources Running and start their run duration only once N members of
            their gang run, on any agent's nodes (see :mod:`hollow.gangs`); False reproduces the
            behaviour before gangs (each member's run counts from its own start).  A pool's
            ``lifecycle.gang_barrier`` overrides it for that pool.  Pods without the label are not
            affected either way.
    """

    shard: Shard = field(default_factory=Shard)
    heartbeat: HeartbeatSettings = field(default_factory=HeartbeatSettings)
    api: ApiSettings = field(default_factory=ApiSettings)
    watch: WatchSettings = field(default_factory=WatchSettings)
    identity: NodeIdentity = field(default_factory=NodeIdentity)
    monitor: MonitorSettings = field(default_factory=MonitorSettings)
    delete_nodes_on_exit: bool = False
    metrics_host: str = "127.0.0.1"
    metrics_port: int = 0
    gang_barrier: bool = True
