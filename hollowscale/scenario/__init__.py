"""Scenario files: typed dataclasses (:mod:`.model`) and validation (:mod:`.validate`)."""

from hollowscale.scenario.errors import FieldError, ScenarioError
from hollowscale.scenario.model import (
    DEFAULT_SLOS,
    AgentSpec,
    ArrivalSpec,
    ClusterSpec,
    DurationDist,
    FaultSpec,
    MeasurementSpec,
    RoleSpec,
    Scenario,
    SloSpec,
    WorkloadSpec,
)
from hollowscale.scenario.validate import load_scenario, parse_duration, parse_scenario

__all__ = [
    "DEFAULT_SLOS",
    "AgentSpec",
    "ArrivalSpec",
    "ClusterSpec",
    "DurationDist",
    "FaultSpec",
    "FieldError",
    "MeasurementSpec",
    "RoleSpec",
    "Scenario",
    "ScenarioError",
    "SloSpec",
    "WorkloadSpec",
    "load_scenario",
    "parse_duration",
    "parse_scenario",
]
