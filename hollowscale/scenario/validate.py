"""Scenario YAML -> :class:`~hollowscale.scenario.model.Scenario`, every problem reported at once.

The file is read with :mod:`kubecore.yamlfile` (duplicate keys, YAML 1.1 booleans, aliases and the
like are refused) and validated by :class:`~hollowscale.scenario.model.ScenarioFile`, which composes
the engines' own specs, so the scenario, the hollow agent and the load generator cannot disagree
about a pool or a workload.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hollowscale.scenario.model import Scenario, ScenarioFile
from kubecore.schema import FieldError, SpecError, show, validate
from kubecore.yamlfile import load_yaml

#: every scenario problem is a SpecError (file, field path, what was given, what was expected)
ScenarioError = SpecError


def parse_scenario(doc: Any, source: str, base_dir: str | Path | None = None) -> Scenario:
    """Validate a parsed document; raise :class:`ScenarioError` listing every problem.

    Args:
        doc: the parsed YAML.
        source: file name for messages.
        base_dir: folder that relative file names in the scenario (a pool's ``stages``) are read from.
    """
    if not isinstance(doc, dict):
        raise SpecError(source, [FieldError("", "expected a scenario mapping with pools, workloads and arrival, "
                                                f"got {show(doc)}")])
    folder = Path(base_dir) if base_dir is not None else Path(source).parent
    sf = validate(ScenarioFile, doc, source, context={"base_dir": folder})
    return Scenario.from_file(sf, source)


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario file."""
    return parse_scenario(load_yaml(path), str(path), Path(path).parent)
