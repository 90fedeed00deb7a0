"""Workload traces: the format, its readers and what a trace holds (issue 28).

A trace is nodes of fixed shapes and pods with their requests (:mod:`.model`), read from the CSV
columns Alibaba published with its GPU-sharing trace (:mod:`.csvfile`; the files are in
``traces/alibaba-gpu-2023/``) or from a ``kubectl get nodes,pods -A -o json`` dump of a real cluster
(:mod:`.kubedump`), checked as a whole before anything starts (:mod:`.read`), counted
(:mod:`.figures`), cut down and written back (:mod:`.excerpt`).  The paper's protocol as its simulator
runs it: the pod sequence for a seed (:mod:`.paper`, drawing Go's ``math/rand`` exactly:
:mod:`.gorand`), its allocation curve, and its fragmentation measure on the replay's account of the
cluster (:mod:`.frag`).  ``docs/trace-format.md`` is the
user's description of the format.
"""

from hollowscale.trace.excerpt import excerpt, write_trace
from hollowscale.trace.figures import inspect_trace
from hollowscale.trace.kubedump import DumpOptions
from hollowscale.trace.model import KIND_TITLES, KINDS, Trace, TraceError, TraceNode, TracePod, TraceProblem
from hollowscale.trace.read import read_trace

__all__ = ["KINDS", "KIND_TITLES", "DumpOptions", "Trace", "TraceError", "TraceNode", "TracePod", "TraceProblem",
           "excerpt", "inspect_trace", "read_trace", "write_trace"]
