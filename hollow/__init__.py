"""hollow: a hollow-node agent that keeps thousands of fake Nodes Ready in a real control plane.

Layering (each module has one job; arrows are imports):

* data, pure: :mod:`hollow.pools` (the pools file), :mod:`hollow.stages` (the pod lifecycle table,
  default ``hollow/stages.yaml``), :mod:`hollow.sharding`, :mod:`hollow.podstatus`,
  :mod:`hollow.nodebody`, :mod:`hollow.bodies`, :mod:`hollow.ipam`, :mod:`hollow.settings`,
  :mod:`hollow.leaf` (spec helpers)
* runtime: :mod:`hollow.clock`, :mod:`hollow.timers`, :mod:`hollow.api`, :mod:`hollow.watching`,
  :mod:`hollow.metrics`, :mod:`hollow.monitor`
* controllers: :mod:`hollow.nodes`, :mod:`hollow.leases`, :mod:`hollow.pods` (with :mod:`hollow.gangs`,
  the gang barrier registry), :mod:`hollow.faults`
* wiring: :mod:`hollow.agent`, :mod:`hollow.server`, :mod:`hollow.cli`, ``python -m hollow``;
  :mod:`hollow.process` starts an agent as a child process (tests, benchmarks, scenario runners)

Behaviour (what a pod or node does, and when) is data in the first group; controllers apply it; the
runtime only moves bytes.  ``hollow`` imports nothing of the project except the ground floor,
:mod:`kubecore` (durations, distributions, the validation policy, strict YAML, kubeconfig, child
processes, Prometheus text); the orchestrator (:mod:`hollowscale`) imports ``hollow``, never the reverse.
"""

__all__: list[str] = []
