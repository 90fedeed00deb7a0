"""The run orchestrator (``hollowscale run``)."""

from hollowscale.run.orchestrator import EXIT_INCOMPLETE, EXIT_INTERRUPTED, EXIT_PASSED, EXIT_SLO_FAILED, Runner

__all__ = ["EXIT_INCOMPLETE", "EXIT_INTERRUPTED", "EXIT_PASSED", "EXIT_SLO_FAILED", "Runner"]
