"""Scenario files: the typed model (:mod:`.model`, composing the engines' specs) and loading (:mod:`.validate`)."""

from hollowscale.scenario.model import (
    DEFAULT_SLOS,
    AgentSpec,
    ClusterSpec,
    FaultSpec,
    MeasurementSpec,
    Scenario,
    ScenarioFile,
    SloSpec,
)
from hollowscale.scenario.validate import ScenarioError, load_scenario, parse_scenario
from kubecore.schema import FieldError

__all__ = [
    "DEFAULT_SLOS",
    "AgentSpec",
    "ClusterSpec",
    "FaultSpec",
    "FieldError",
    "MeasurementSpec",
    "Scenario",
    "ScenarioError",
    "ScenarioFile",
    "SloSpec",
    "load_scenario",
    "parse_scenario",
]
