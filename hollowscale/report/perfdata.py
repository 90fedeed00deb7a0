"""Every figure of a run summary as ClusterLoader2 PerfData JSON, for perfdash-style dashboards.

The format is ClusterLoader2's own (kubernetes/perf-tests, ``clusterloader2/pkg/measurement/util/perftype.go``)::

    type DataItem struct {
        Data   map[string]float64 `json:"data"`              // bucket -> value, e.g. "Perc90" -> 23.5
        Unit   string             `json:"unit"`
        Labels map[string]string  `json:"labels,omitempty"`
    }
    type PerfData struct {
        Version   string     `json:"version"`
        DataItems []DataItem `json:"dataItems"`
        Labels    map[string]string `json:"labels,omitempty"`
    }

and the files are named as ClusterLoader2's test executor names them
(``clusterloader2/pkg/test/simple_test_executor.go``: ``<summaryName>_<testName>_<time>.json``), which is what
perfdash matches them by (``perfdash/config.go``: ``OutputFilePrefix`` + ``_`` + test name; ``perfdash/parser.go``:
``parsePerfData`` keeps the items whose ``version`` matches the first file read).  Three kinds of file, each
shaped like the ClusterLoader2 measurement it stands in for:

* ``PodStartupLatency_PodStartupLatency_<scenario>_<time>.json`` - version ``1.0`` and items labelled
  ``{"Metric": "pod_startup" | "create_to_schedule"}`` in ``ms`` with ``Perc50/Perc90/Perc99``, as
  ``slos/pod_startup_latency.go`` writes them through ``util.LatencyMapToPerfData`` (``LatencyMetric.ToPerfData``).
  Our pod startup is created -> Running seen by a watch, which is CL2's ``pod_startup`` (create -> watch); our
  scheduling latency is created -> ``spec.nodeName`` set, CL2's ``create_to_schedule``.  The sample count is
  kept as a ``Count`` label (CL2 has none there; the label does not change which bucket a value is in).
* ``APIResponsivenessPrometheus_<scenario>_<time>.json`` - version ``v1``, one item per verb in ``ms`` with
  labels ``Verb`` and ``Count`` as ``slos/api_responsiveness_prometheus.go`` writes them (perfdash's request
  count parser reads ``Count``).  Our figures are per verb over all resources, so ``Resource``,
  ``Subresource`` and ``Scope`` are left out rather than filled with a guess, and only the percentiles the
  run measured are written (p50 and p99; no p90 is invented).
* ``GenericPrometheusQuery <Name>_<scenario>_<time>.json`` - every other figure, one file per top-level
  figure of ``measurements`` (``SchedulingThroughputPodsPerS``, ``Jobs``, ``Components`` ...), shaped like
  ``common/generic_query_measurement.go`` output (version ``v1``; the space and a name without ``_`` are
  CL2's, so perfdash's ``FetchMetricNameFromArtifact`` can cut the name out of the file name).  One item per
  (nested figure, unit) with label ``Metric`` = the figure's dotted path, e.g. ``components.by_job.etcd``.

Data keys: ``p50/p90/p95/p99`` -> ``Perc50/...``, ``avg`` -> ``Average``, ``max`` -> ``Max``, ``min`` ->
``Min`` (CL2's spelling); other leaves keep their own name.  Units from the figure's name: ``_ms`` -> ``ms``,
``_s``/``_seconds`` -> ``s``, ``_pct`` -> ``%``, ``_per_s`` -> ``1/s`` (CL2's throughput unit), ``cpu_cores`` ->
``cores``, ``_mib`` -> ``MiB`` (perfdash's resource-usage units), anything else (counts) -> ``""`` as CL2's
request counts.  A figure that is a bare number (no percentiles) is one item with the data key ``Value``.  Strings, booleans and missing values (``null``) are not figures and are not written.

The time in the file name is the run's start in ISO 8601 *basic* format (``20261201T175409Z``), not CL2's
RFC 3339: ``actions/upload-artifact`` refuses ``:`` in file names, and perfdash only matches the prefix.
:func:`read_perfdata` reads a folder back into the flat ``{dotted path: value}`` of the summary it came from
(the round trip the tests check).
"""

from __future__ import annotations

import json
import math
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

SUBDIR = "perfdata"
POD_STARTUP_PREFIX = "PodStartupLatency_PodStartupLatency"
API_PREFIX = "APIResponsivenessPrometheus"
GENERIC_PREFIX = "GenericPrometheusQuery"

#: summary figure -> CL2 PodStartupLatency ``Metric`` label
POD_STARTUP_METRICS = {"pod_startup_latency_ms": "pod_startup", "pod_scheduling_latency_ms": "create_to_schedule"}
#: summary leaf -> CL2 data key (and back)
DATA_KEYS = {"p50": "Perc50", "p90": "Perc90", "p95": "Perc95", "p99": "Perc99", "avg": "Average", "max": "Max",
             "min": "Min"}
_LEAF_OF = {v: k for k, v in DATA_KEYS.items()}
_UNIT_SUFFIXES = (("cpu_cores", "cores"), ("_mib", "MiB"), ("_per_s", "1/s"), ("_per_hour", "1/h"), ("_ms", "ms"),
                  ("_seconds", "s"), ("_pct", "%"), ("_s", "s"))


def _is_figure(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and not (isinstance(v, float) and math.isnan(v))


def unit_of(path: str) -> str:
    """Unit of a figure at dotted ``path`` (leaf included): the innermost part whose name carries one."""
    parts = path.split(".")
    if parts[-1] in ("count", "pods", "submitted", "completed", "failed"):
        return ""
    for part in reversed(parts):
        # ``cpu_cores_avg`` / ``rss_mib_max``: the unit sits before the statistic
        name = re.sub(r"_(avg|max|min|p\d+)$", "", part)
        for suffix, unit in _UNIT_SUFFIXES:
            if name.endswith(suffix) or name == suffix.lstrip("_"):
                return unit
    return ""


def camel(name: str) -> str:
    """``scheduling_throughput_pods_per_s`` -> ``SchedulingThroughputPodsPerS`` (no ``_``: CL2's delimiter)."""
    return "".join(p[:1].upper() + p[1:] for p in re.split(r"[_\-\s.]+", name) if p)


def _stamp(summary: dict[str, Any]) -> str:
    raw = summary.get("started_at")
    try:
        t = datetime.fromisoformat(str(raw).replace("Z", "+00:00")) if raw else datetime.now(UTC)
    except ValueError:
        t = datetime.now(UTC)
    return t.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")


def _test_name(summary: dict[str, Any]) -> str:
    # perfdash cuts file names at "_": keep the scenario name free of it
    return re.sub(r"[^A-Za-z0-9.-]+", "-", str(summary.get("scenario") or "hollowscale")).strip("-") or "hollowscale"


def _count_label(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else repr(float(v))


def _walk(node: dict[str, Any], path: str) -> list[tuple[str, dict[str, float]]]:
    """(dotted path, its direct numeric leaves) for every dict under ``node`` that has some."""
    leaves = {k: float(v) for k, v in node.items() if _is_figure(v)}
    out = [(path, leaves)] if leaves else []
    for k, v in node.items():
        if isinstance(v, dict) and k != "queries":
            out += _walk(v, f"{path}.{k}" if path else str(k))
    return out


def _items(path: str, leaves: dict[str, float], extra: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """One DataItem per unit among ``leaves`` of the figure at ``path``."""
    by_unit: dict[str, dict[str, float]] = {}
    for leaf, v in leaves.items():
        by_unit.setdefault(unit_of(f"{path}.{leaf}"), {})[DATA_KEYS.get(leaf, leaf)] = v
    return [{"data": data, "unit": unit, "labels": {"Metric": path, **(extra or {})}}
            for unit, data in sorted(by_unit.items())]


def perfdata_docs(summary: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """File name -> PerfData document for every figure of ``summary['measurements']``."""
    raw = summary.get("measurements")
    m: dict[str, Any] = raw if isinstance(raw, dict) else {}
    test, stamp = _test_name(summary), _stamp(summary)
    docs: dict[str, dict[str, Any]] = {}

    covered: set[str] = set()  # figures whose p50/p90/p99/count went into a CL2-named file
    startup: list[dict[str, Any]] = []
    for key, metric in POD_STARTUP_METRICS.items():
        fig = m.get(key)
        if not isinstance(fig, dict):
            continue
        data = {DATA_KEYS[k]: float(fig[k]) for k in ("p50", "p90", "p99") if _is_figure(fig.get(k))}
        if data:
            labels = {"Metric": metric}
            if _is_figure(fig.get("count")):
                labels["Count"] = _count_label(fig["count"])
            startup.append({"data": data, "unit": "ms", "labels": labels})
            covered.add(key)
    if startup:
        docs[f"{POD_STARTUP_PREFIX}_{test}_{stamp}.json"] = {"version": "1.0", "dataItems": startup}

    api: list[dict[str, Any]] = []
    for verb, fig in sorted((m.get("api_latency_ms") or {}).items()):
        if not isinstance(fig, dict):
            continue
        data = {DATA_KEYS[k]: float(fig[k]) for k in ("p50", "p90", "p99") if _is_figure(fig.get(k))}
        if data:
            labels = {"Verb": str(verb)}
            if _is_figure(fig.get("count")):
                labels["Count"] = _count_label(fig["count"])
            api.append({"data": data, "unit": "ms", "labels": labels})
            covered.add(f"api_latency_ms.{verb}")
    if api:
        docs[f"{API_PREFIX}_{test}_{stamp}.json"] = {"version": "v1", "dataItems": api}

    for key, fig in m.items():
        items: list[dict[str, Any]] = []
        if isinstance(fig, dict):
            for path, leaves in _walk(fig, str(key)):
                if path in covered:
                    leaves = {k: v for k, v in leaves.items() if k not in ("p50", "p90", "p99", "count")}
                if leaves:
                    items += _items(path, leaves)
        elif _is_figure(fig):
            items = [{"data": {"Value": float(fig)}, "unit": unit_of(str(key)), "labels": {"Metric": str(key)}}]
        if items:
            docs[f"{GENERIC_PREFIX} {camel(str(key))}_{test}_{stamp}.json"] = {"version": "v1", "dataItems": items}
    return docs


#: the names :func:`write_perfdata` wrote last, one a line, in the PerfData folder (perfdash reads only
#: ``<prefix>_<test>...json`` files)
WRITTEN = ".written"


def _written(out: Path) -> list[str] | None:
    """The file names the last :func:`write_perfdata` into ``out`` recorded; None when it recorded none."""
    try:
        return [n for n in (out / WRITTEN).read_text().splitlines() if n and "/" not in n and n != WRITTEN]
    except OSError:
        return None


def write_perfdata(run_dir: Path, summary: dict[str, Any]) -> list[Path]:
    """Write every figure of ``summary`` as PerfData JSON into ``run_dir/perfdata/``; the paths written.

    A report written twice (a re-render) leaves no stale files: the files the last write recorded in
    :data:`WRITTEN` are removed first, exactly those (the names carry the run's start time, so a new
    write may not overwrite them); nothing else in the folder is touched.
    """
    out = Path(run_dir) / SUBDIR
    out.mkdir(parents=True, exist_ok=True)
    for name in _written(out) or ():
        (out / name).unlink(missing_ok=True)
    docs = perfdata_docs(summary)
    (out / WRITTEN).write_text("".join(f"{name}\n" for name in docs))  # before the files: a crash leaves none unlisted
    paths = []
    for name, doc in docs.items():
        path = out / name
        path.write_text(json.dumps(doc, indent=2, sort_keys=False) + "\n")
        paths.append(path)
    return paths


def read_perfdata(folder: Path) -> dict[str, float]:
    """The flat ``{dotted summary path: value}`` a PerfData folder written by :func:`write_perfdata` holds."""
    out: dict[str, float] = {}
    startup_of = {v: k for k, v in POD_STARTUP_METRICS.items()}
    written = _written(Path(folder))  # a folder written before the record was kept: its JSON files
    files = sorted(Path(folder) / n for n in written) if written is not None else sorted(Path(folder).glob("*.json"))
    for path in files:
        doc = json.loads(path.read_text())
        for item in doc["dataItems"]:
            labels, data = item.get("labels") or {}, item["data"]
            if path.name.startswith(POD_STARTUP_PREFIX + "_"):
                base = startup_of[labels["Metric"]]
            elif path.name.startswith(API_PREFIX + "_"):
                base = f"api_latency_ms.{labels['Verb']}"
            else:
                base = labels["Metric"]
                if "." not in base and set(data) == {"Value"}:
                    out[base] = data["Value"]
                    continue
            for key, v in data.items():
                out[f"{base}.{_LEAF_OF.get(key, key)}"] = v
            if "Count" in labels and not path.name.startswith(GENERIC_PREFIX):
                out[f"{base}.count"] = float(labels["Count"])
    return out


def flat_figures(measurements: dict[str, Any], prefix: str = "") -> dict[str, float]:
    """Every numeric leaf of ``measurements`` as ``{dotted path: value}`` (what PerfData must hold)."""
    out: dict[str, float] = {}
    for k, v in measurements.items():
        path = f"{prefix}.{k}" if prefix else str(k)
        if isinstance(v, dict):
            if k != "queries":
                out.update(flat_figures(v, path))
        elif _is_figure(v):
            out[path] = float(v)
    return out
