"""Scenario YAML -> :class:`~hollowscale.scenario.model.Scenario`, every problem reported at once.

The file is read with :mod:`kubecore.yamlfile` (duplicate keys, YAML 1.1 booleans, aliases and the
like are refused) and validated by :class:`~hollowscale.scenario.model.ScenarioFile`, which composes
the engines' own specs, so the scenario, the hollow agent and the load generator cannot disagree
about a pool or a workload.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from hollowscale.scenario.model import Scenario, ScenarioFile
from kubecore.schema import FieldError, SpecError, field_errors, show, validate
from kubecore.yamlfile import load_yaml
from loadgen.spec import LoadSpec

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
    try:
        return Scenario.from_file(sf, source)
    except ValidationError as exc:
        # a check of the engines' specs that the first pass missed: the same one-line form, never a traceback
        # (the first pass checks all that is known; the paths here are those of the resolved load spec)
        raise SpecError(source, [FieldError(f"load.{e.path}" if e.path else "load", e.message)
                                 for e in field_errors(exc, LoadSpec)]) from None


def load_scenario(path: str | Path, backend: str | None = None) -> Scenario:
    """Read and validate a scenario file; ``backend`` replaces its ``cluster.backend`` (``hollowscale run
    --cluster``), validated with the rest as if the file said it."""
    doc = load_yaml(path)
    if backend is not None and isinstance(doc, dict):
        cluster = doc.get("cluster")
        doc["cluster"] = {**(cluster if isinstance(cluster, dict) else {}), "backend": backend}
    return parse_scenario(doc, str(path), Path(path).parent)
