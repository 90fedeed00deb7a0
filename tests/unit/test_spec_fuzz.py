"""Fuzzing the scenario and pools loaders: no input may produce a traceback, a hang or a memory blow-up.

Random bytes, and random mutations of the shipped files (a value replaced by anything YAML can
hold, a key dropped, an unknown key added), go through the same path as ``hollowscale validate``:
strict YAML, then the schema.  Each example must end in a valid spec or a
:class:`~kubecore.schema.SpecError` naming the file, within the per-example deadline.
"""

from __future__ import annotations

import copy
import random
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hollow.pools import parse_pools
from hollowscale.scenario import parse_scenario
from kubecore.schema import SpecError
from kubecore.yamlfile import parse_yaml

ROOT = Path(__file__).resolve().parents[2]
#: the shipped scenarios with pools and a load (a trace scenario's nodes and pods are its trace's)
SHIPPED = {p.stem: doc for p in sorted((ROOT / "scenarios").glob("*.yaml"))
           if "workload" not in (doc := yaml.safe_load(p.read_text()))}
FUZZ = settings(max_examples=80, deadline=2000, suppress_health_check=[HealthCheck.too_slow], derandomize=True)

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=40),
    st.sampled_from(["30s", "-5s", "forever", "1h30m", "500m", "64Gi", "nvidia.com/gpu", "", "0", "1e400", "ramp",
                     "uniform", "Job", "existing", "kube-system", "default", "  ", "\x00", "💥"]),
)
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                       st.dictionaries(st.text(max_size=12), inner, max_size=4)),
                      max_leaves=12)


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _paths(v, (*prefix, i))
    return out


def _mutate(doc: Any, rng: random.Random, value: Any) -> Any:
    doc = copy.deepcopy(doc)
    path = rng.choice(_paths(doc)[1:])
    parent = doc
    for part in path[:-1]:
        parent = parent[part]
    op = rng.randrange(3)
    if op == 0:
        parent[path[-1]] = value
    elif op == 1 and isinstance(parent, dict):
        del parent[path[-1]]
    elif isinstance(parent, dict):
        parent[f"unknown_{rng.randrange(1000)}"] = value
    else:
        parent.append(value)
    return doc


def _loads_or_refuses(text: str) -> None:
    started = time.monotonic()
    try:
        doc = parse_yaml(text, "fuzz.yaml")
        parse_scenario(doc, "fuzz.yaml")
    except SpecError as exc:
        assert str(exc).startswith("fuzz.yaml"), str(exc)
        assert exc.errors, "a refusal names at least one problem"
    assert time.monotonic() - started < 2.0


@FUZZ
@given(st.binary(max_size=2000))
def test_random_bytes(data: bytes) -> None:
    _loads_or_refuses(data.decode("utf-8", errors="replace"))


@FUZZ
@given(st.sampled_from(sorted(SHIPPED)), st.integers(min_value=0, max_value=2**32), values)
def test_mutated_scenarios(name: str, seed: int, value: Any) -> None:
    doc = _mutate(SHIPPED[name], random.Random(seed), value)
    try:
        text = yaml.safe_dump(doc, allow_unicode=True)
    except yaml.YAMLError:
        return
    _loads_or_refuses(text)


@FUZZ
@given(st.sampled_from(sorted(SHIPPED)), st.integers(min_value=0, max_value=2**32), values)
def test_mutated_pools(name: str, seed: int, value: Any) -> None:
    doc = _mutate({"pools": SHIPPED[name]["pools"]}, random.Random(seed), value)
    try:
        parse_pools(doc, "pools.yaml")
    except SpecError as exc:
        assert str(exc).startswith("pools.yaml") and exc.errors


@pytest.mark.parametrize("text", [
    # "billion laughs": nine levels of aliases would expand to 10^9 items
    "a: &a [x,x,x,x,x,x,x,x,x,x]\n" + "".join(f"{c}: &{c} [*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p}]\n"
                                                 for p, c in zip("abcdefgh", "bcdefghi", strict=True)),
    "[" * 20000 + "]" * 20000,  # nesting deeper than the parser's recursion
    "name: " + "x" * (2 << 20),  # larger than any spec file
])
def test_hostile_yaml_is_refused_quickly(text: str) -> None:
    started = time.monotonic()
    with pytest.raises(SpecError):
        parse_scenario(parse_yaml(text, "evil.yaml"), "evil.yaml")
    assert time.monotonic() - started < 5.0
