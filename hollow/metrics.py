"""The agent's Prometheus metrics, in a private registry (several agents may share a process in tests).

Names are prefixed ``hollow_``; a scenario's Prometheus scrapes them next to the control plane's, so
a reader can tell whether a slow run was the scheduler's fault or the agent's.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

_LAG_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 40.0)
_API_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


@dataclass
class Metrics:
    """All metric families of one agent."""

    registry: CollectorRegistry = field(default_factory=lambda: CollectorRegistry(auto_describe=True))

    def __post_init__(self) -> None:
        r = self.registry
        self.nodes_managed = Gauge("hollow_nodes_managed", "Nodes owned by this agent (its shard)", registry=r)
        self.nodes_registered = Gauge("hollow_nodes_registered", "Nodes created or re-adopted", registry=r)
        self.nodes_ready = Gauge(
            "hollow_nodes_ready", "Nodes whose heartbeats are current and not stopped by a fault", registry=r)
        self.node_registrations = Counter(
            "hollow_node_registrations", "Node registrations by outcome (created, adopted, error)",
            ["result"], registry=r)
        self.node_status_updates = Counter(
            "hollow_node_status_updates", "Node status patches by outcome", ["result"], registry=r)
        self.lease_renewals = Counter(
            "hollow_lease_renewals", "Lease renewals by outcome (renewed, created, error)", ["result"], registry=r)
        self.lease_renew_lag = Histogram(
            "hollow_lease_renew_lag_seconds",
            "Time from a lease renewal's deadline until the apiserver acknowledged it",
            buckets=_LAG_BUCKETS, registry=r)
        self.pod_transitions = Counter(
            "hollow_pod_transitions", "Pod status transitions written, by new phase", ["phase"], registry=r)
        self.pod_deletions = Counter("hollow_pod_deletions", "Pods finalised with DELETE grace 0", registry=r)
        self.pods_tracked = Gauge("hollow_pods_tracked", "Pods on this agent's nodes being tracked", registry=r)
        self.api_requests = Counter(
            "hollow_api_requests", "API requests by verb and HTTP status (0 = no response)",
            ["verb", "code"], registry=r)
        self.api_latency = Histogram(
            "hollow_api_request_duration_seconds", "API request latency by verb (one attempt)",
            ["verb"], buckets=_API_BUCKETS, registry=r)
        self.api_retries = Counter(
            "hollow_api_retries", "API request retries by verb and reason", ["verb", "reason"], registry=r)
        self.api_inflight = Gauge("hollow_api_inflight", "API requests in flight", registry=r)
        self.api_waiting = Gauge(
            "hollow_api_waiting", "Requests waiting for the global concurrency bound (queue)", registry=r)
        self.watch_restarts = Counter(
            "hollow_watch_restarts", "Watch restarts by resource and reason", ["resource", "reason"], registry=r)
        self.watch_events = Counter(
            "hollow_watch_events", "Watch events received by resource and type", ["resource", "type"], registry=r)
        self.loop_lag = Histogram(
            "hollow_event_loop_lag_seconds", "How late the event loop woke a periodic probe",
            buckets=_LAG_BUCKETS, registry=r)
        self.timers_due = Gauge("hollow_timers_backlog", "Actions past their deadline not yet started", registry=r)
        self.warnings = Counter(
            "hollow_self_warnings", "Times the agent warned that it is falling behind, by kind", ["kind"], registry=r)
        self.cpu_seconds = Gauge("hollow_process_cpu_seconds", "CPU seconds used by the agent process", registry=r)
        self.faulted_nodes = Gauge("hollow_fault_heartbeat_nodes", "Nodes whose heartbeats a fault stops", registry=r)
        self.slices_published = Gauge(
            "hollow_dra_nodes_published", "Nodes whose ResourceSlices all exist (DRA pools)", registry=r)
        self.slice_writes = Counter(
            "hollow_dra_slice_writes", "ResourceSlice writes by outcome (created, adopted, replaced, error)",
            ["result"], registry=r)
        self.dra_prepares = Counter(
            "hollow_dra_prepares", "Claim preparations of pods (the kubelet's NodePrepareResources) by outcome "
            "(prepared, unallocated, unreserved, missing, error)", ["result"], registry=r)
        self.dra_prepare_seconds = Histogram(
            "hollow_dra_prepare_seconds", "Time from a pod's binding until its claims were prepared",
            buckets=_LAG_BUCKETS, registry=r)

    def render(self) -> bytes:
        """The text exposition format."""
        return generate_latest(self.registry)
