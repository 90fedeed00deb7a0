"""Prometheus text exposition -> samples, through ``prometheus_client``'s own parser.

Agents, teachers and benchmarks read each other's ``/metrics``; parsing that format by hand gets
labels with spaces, escapes and ``+Inf`` wrong, so everything goes through the library here.
"""

from __future__ import annotations

import math
import urllib.error
import urllib.request

from prometheus_client.parser import text_string_to_metric_families


def sample_key(name: str, labels: dict[str, str]) -> str:
    """``name{a="1",b="2"}`` with labels sorted (``name`` alone when unlabelled)."""
    if not labels:
        return name
    inner = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return f"{name}{{{inner}}}"


def parse_samples(text: str) -> dict[str, float]:
    """Every sample of ``text`` as :func:`sample_key` -> value (histogram buckets included).

    Raises:
        ValueError: the text is not in the exposition format.
    """
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[sample_key(sample.name, dict(sample.labels))] = float(sample.value)
    return out


def families(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Every sample of ``text`` grouped by sample name (``x_bucket``, ``x_sum`` and ``x_count`` of a
    histogram each under its own name): ``name -> [(labels, value)]``.

    Raises:
        ValueError: the text is not in the exposition format.
    """
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append((dict(sample.labels), float(sample.value)))
    return out


def scrape(url: str, timeout_s: float = 5.0) -> dict[str, float]:
    """GET ``url`` (a ``/metrics`` endpoint on loopback) and parse it; {} when unreachable or not metrics."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:
            text = resp.read().decode("utf-8", errors="replace")
    except (urllib.error.URLError, OSError):
        return {}
    try:
        return parse_samples(text)
    except ValueError:
        return {}


def total(samples: dict[str, float], name: str) -> float:
    """Sum of every sample of metric ``name`` over all label sets (NaN samples skipped)."""
    acc = 0.0
    for key, value in samples.items():
        if (key == name or key.startswith(name + "{")) and not math.isnan(value):
            acc += value
    return acc
