"""hollow: a hollow-node agent that keeps thousands of fake Nodes Ready in a real control plane.

Layering (each module has one job; arrows are imports):

* data, pure: :mod:`hollow.durations`, :mod:`hollow.pools`, :mod:`hollow.sharding`,
  :mod:`hollow.stages`, :mod:`hollow.podstatus`, :mod:`hollow.nodebody`, :mod:`hollow.bodies`,
  :mod:`hollow.ipam`, :mod:`hollow.settings`
* runtime: :mod:`hollow.clock`, :mod:`hollow.timers`, :mod:`hollow.api`, :mod:`hollow.watching`,
  :mod:`hollow.metrics`, :mod:`hollow.monitor`
* controllers: :mod:`hollow.nodes`, :mod:`hollow.leases`, :mod:`hollow.pods`, :mod:`hollow.faults`
* wiring: :mod:`hollow.agent`, :mod:`hollow.server`, :mod:`hollow.cli`, ``python -m hollow``;
  :mod:`hollow.process` starts an agent as a child process (tests, benchmarks, scenario runners)

Behaviour (what a pod or node does, and when) is data in the first group; controllers apply it; the
runtime only moves bytes.  ``hollow`` imports nothing of the project except :mod:`hollowscale.kube`.
"""

__all__: list[str] = []
