"""The trace's CSV format: a node list and a pod list, with the columns Alibaba published.

The columns (their meaning, unit and rule) are :data:`NODE_COLUMNS` and :data:`POD_COLUMNS`; the
README of ``traces/alibaba-gpu-2023/`` and ``docs/trace-format.md`` say the same in prose.  A file
from another cluster with these columns reads the same way.  Columns may come in any order; every
required column must be there, and a column of another name is refused (a misspelled one would
otherwise be silently ignored).  Every problem of a file is found before any is reported, each with
``file:line:column``.
"""

from __future__ import annotations

import csv
import difflib
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from hollowscale.trace.model import GPU_MILLI, NODE_HEADER, TraceNode, TracePod, TraceProblem

#: a GPU model, a QoS class: usable as a label value and a DRA attribute
_WORD = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?$")
_WHOLE = re.compile(r"^[0-9]+$")
PHASES = ("Pending", "Running", "Succeeded", "Failed", "Unknown")


@dataclass(frozen=True)
class Column:
    """One column of a trace file.

    Attributes:
        name: the header's name.
        required: a file without it is refused.
        unit: what its numbers count ("" for text).
        meaning: what it says.
    """

    name: str
    required: bool
    unit: str
    meaning: str


NODE_COLUMNS = (
    Column("sn", True, "", "the node's name (non-empty, unique)"),
    Column("cpu_milli", True, "milli-CPU", "allocatable CPU (1000 = one core), > 0"),
    Column("memory_mib", True, "MiB", "allocatable memory, > 0"),
    Column("gpu", True, "GPUs", "whole GPUs, >= 0"),
    Column("model", True, "", "the GPUs' model: set when gpu > 0, empty when 0"),
)
assert tuple(c.name for c in NODE_COLUMNS) == NODE_HEADER

POD_COLUMNS = (
    Column("name", True, "", "the pod's name (non-empty, unique)"),
    Column("cpu_milli", True, "milli-CPU", "CPU requested, >= 0"),
    Column("memory_mib", True, "MiB", "memory requested, >= 0"),
    Column("num_gpu", True, "GPUs", "GPUs requested, >= 0"),
    Column("gpu_milli", True, "milli-GPU",
           "thousandths of each GPU: 0 without GPUs, 1..1000 for one GPU (below 1000 a share), 1000 for more"),
    Column("gpu_spec", False, "", "GPU models the pod may run on, |-separated (empty: any)"),
    Column("qos", False, "", "QoS class (Alibaba: LS, BE, Burstable, Guaranteed)"),
    Column("pod_phase", False, "", "phase when the trace was taken: " + ", ".join(PHASES)),
    Column("creation_time", False, "s", "creation, seconds from the trace's start"),
    Column("deletion_time", False, "s", "deletion, seconds from the trace's start, >= creation_time"),
    Column("scheduled_time", False, "s", "binding, seconds from the trace's start (empty: never)"),
)


class _Bad(ValueError):
    """A cell that cannot be read (the message says what was expected and what was found)."""


def _whole(text: str, lo: int = 0) -> int:
    if not _WHOLE.match(text):
        what = "a whole number" + (f" >= {lo}" if lo else " >= 0")
        if not text:
            raise _Bad(f"is empty; expected {what}")
        if text.startswith("-") and _WHOLE.match(text[1:]):
            raise _Bad(f"expected {what}, got a negative value {text!r}")
        raise _Bad(f"expected {what}, got {text!r}")
    value = int(text)
    if value < lo:
        raise _Bad(f"expected a whole number >= {lo}, got {text!r}")
    return value


def _optional_whole(text: str) -> int | None:
    return None if text == "" else _whole(text)


def _name(text: str) -> str:
    if not text or text != text.strip():
        raise _Bad(f"expected a non-empty name without surrounding spaces, got {text!r}")
    return text


def _word(what: str) -> Callable[[str], str]:
    def read(text: str) -> str:
        if text and not _WORD.match(text):
            raise _Bad(f"expected {what} (letters, digits, '-', '_', '.'; at most 63), got {text!r}")
        return text
    return read


def _models(text: str) -> tuple[str, ...]:
    names = [m for m in text.split("|") if m != ""]
    for m in names:
        if not _WORD.match(m):
            raise _Bad(f"expected GPU models separated by '|', got {text!r}")
    return tuple(sorted(set(names)))


def _phase(text: str) -> str:
    if text and text not in PHASES:
        raise _Bad(f"expected one of {', '.join(PHASES)} or empty, got {text!r}")
    return text


_NODE_READERS: dict[str, Callable[[str], object]] = {
    "sn": _name, "cpu_milli": lambda t: _whole(t, 1), "memory_mib": lambda t: _whole(t, 1), "gpu": _whole,
    "model": _word("a GPU model"),
}
_POD_READERS: dict[str, Callable[[str], object]] = {
    "name": _name, "cpu_milli": _whole, "memory_mib": _whole, "num_gpu": _whole, "gpu_milli": _whole,
    "gpu_spec": _models, "qos": _word("a QoS class"), "pod_phase": _phase,
    "creation_time": _optional_whole, "deletion_time": _optional_whole, "scheduled_time": _optional_whole,
}


@dataclass(frozen=True)
class _Row:
    line: int
    values: dict[str, object]


def _rows(path: Path, columns: tuple[Column, ...], readers: dict[str, Callable[[str], object]],
          problems: list[TraceProblem], what: str) -> tuple[tuple[str, ...], list[_Row]]:
    """The file's header and its rows read cell by cell; every problem appended to ``problems``."""
    file = str(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        problems.append(TraceProblem("", f"no such {what} file", file=file))
        return (), []
    except (OSError, UnicodeDecodeError) as exc:
        problems.append(TraceProblem("", f"cannot read the {what} file as UTF-8 text: {exc}", file=file))
        return (), []
    reader = csv.reader(text.splitlines(keepends=True), strict=True)
    try:
        header = tuple(next(reader))
    except StopIteration:
        problems.append(TraceProblem("", f"is empty; expected a header line ({','.join(c.name for c in columns)})",
                                     file=file, line=1))
        return (), []
    except csv.Error as exc:
        problems.append(TraceProblem("", f"cannot read the header as CSV: {exc}", file=file, line=1))
        return (), []
    known = [c.name for c in columns]
    before = len(problems)
    seen: set[str] = set()
    for i, name in enumerate(header, start=1):
        if name in seen:
            problems.append(TraceProblem(name, "column named twice", file=file, line=1, column=i))
        elif name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            problems.append(TraceProblem(name or "(empty)", f"unknown column{hint}; a {what} file has "
                                         f"{', '.join(known)}", file=file, line=1, column=i))
        seen.add(name)
    for c in columns:
        if c.required and c.name not in header:
            problems.append(TraceProblem(c.name, f"missing column ({c.meaning}); the header has "
                                         f"{','.join(header)}", file=file, line=1))
    if len(problems) > before:
        return header, []  # the cells cannot be told apart: stop at the header
    rows: list[_Row] = []
    iterator: Iterator[list[str]] = iter(reader)
    while True:
        try:
            cells = next(iterator)
        except StopIteration:
            break
        except csv.Error as exc:
            problems.append(TraceProblem("", f"cannot read the line as CSV: {exc}", file=file, line=reader.line_num))
            break
        line = reader.line_num
        if not cells:
            continue  # a blank line
        if len(cells) != len(header):
            problems.append(TraceProblem("", f"expected {len(header)} fields (as the header), got {len(cells)}",
                                         file=file, line=line))
            continue
        values: dict[str, object] = {}
        ok = True
        for i, (name, cell) in enumerate(zip(header, cells, strict=True), start=1):
            try:
                values[name] = readers[name](cell)
            except _Bad as exc:
                problems.append(TraceProblem(name, str(exc), file=file, line=line, column=i))
                ok = False
        if ok:
            rows.append(_Row(line, values))
    if not rows and len(problems) == before:
        problems.append(TraceProblem("", f"has a header and no {what}s", file=file, line=1))
    return header, rows


def read_nodes(path: Path, problems: list[TraceProblem]) -> tuple[tuple[str, ...], list[TraceNode]]:
    """The nodes of a node-list CSV (and its header); problems appended to ``problems``."""
    header, rows = _rows(path, NODE_COLUMNS, _NODE_READERS, problems, "node")
    nodes: list[TraceNode] = []
    col = {name: i for i, name in enumerate(header, start=1)}
    for row in rows:
        v = row.values
        gpus, model = cast(int, v["gpu"]), cast(str, v["model"])
        if gpus and not model:
            problems.append(TraceProblem("model", f"is empty on a node with {gpus} GPUs; expected the GPUs' model",
                                         file=str(path), line=row.line, column=col["model"]))
            continue
        if model and not gpus:
            problems.append(TraceProblem("model", f"is {model!r} on a node with 0 GPUs; expected empty",
                                         file=str(path), line=row.line, column=col["model"]))
            continue
        nodes.append(TraceNode(cast(str, v["sn"]), cast(int, v["cpu_milli"]), cast(int, v["memory_mib"]), gpus,
                               model, line=row.line))
    return header, nodes


def read_pods(path: Path, problems: list[TraceProblem]) -> tuple[tuple[str, ...], list[TracePod]]:
    """The pods of a pod-list CSV (and its header); problems appended to ``problems``."""
    header, rows = _rows(path, POD_COLUMNS, _POD_READERS, problems, "pod")
    pods: list[TracePod] = []
    col = {name: i for i, name in enumerate(header, start=1)}
    for row in rows:
        v = row.values
        pod = TracePod(
            name=cast(str, v["name"]), cpu_milli=cast(int, v["cpu_milli"]), memory_mib=cast(int, v["memory_mib"]),
            num_gpu=cast(int, v["num_gpu"]), gpu_milli=cast(int, v["gpu_milli"]),
            gpu_spec=cast(tuple[str, ...], v.get("gpu_spec", ())), qos=cast(str, v.get("qos", "")),
            phase=cast(str, v.get("pod_phase", "")), creation_s=cast(int | None, v.get("creation_time")),
            deletion_s=cast(int | None, v.get("deletion_time")), scheduled_s=cast(int | None, v.get("scheduled_time")),
            line=row.line)
        bad = pod_rules(pod)
        for column, message in bad:
            problems.append(TraceProblem(column, message, file=str(path), line=row.line, column=col.get(column)))
        if not bad:
            pods.append(pod)
    return header, pods


def pod_rules(pod: TracePod) -> list[tuple[str, str]]:
    """What is wrong with one pod by itself, as ``(column, message)`` (every input format checks these)."""
    out: list[tuple[str, str]] = []
    if pod.num_gpu == 0 and pod.gpu_milli != 0:
        out.append(("gpu_milli", f"expected 0 for a pod without GPUs (num_gpu 0), got {pod.gpu_milli}"))
    elif pod.num_gpu == 1 and not 1 <= pod.gpu_milli <= GPU_MILLI:
        out.append(("gpu_milli", f"expected 1..{GPU_MILLI} milli-GPU for a one-GPU pod (a share above "
                                 f"{GPU_MILLI} is more than a GPU), got {pod.gpu_milli}"))
    elif pod.num_gpu > 1 and pod.gpu_milli != GPU_MILLI:
        out.append(("gpu_milli", f"expected {GPU_MILLI} for a pod of {pod.num_gpu} GPUs (a GPU share is for one "
                                 f"GPU only), got {pod.gpu_milli}"))
    if pod.gpu_spec and pod.num_gpu == 0:
        out.append(("gpu_spec", f"names GPU models ({'|'.join(pod.gpu_spec)}) on a pod without GPUs"))
    if pod.creation_s is not None and pod.deletion_s is not None and pod.deletion_s < pod.creation_s:
        out.append(("deletion_time", f"expected >= creation_time ({pod.creation_s}), got {pod.deletion_s}"))
    return out


def write_csv(path: Path, header: tuple[str, ...], rows: list[dict[str, str]]) -> None:
    """Rows as a CSV of ``header`` (``\\n`` line ends, as the published files)."""
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(header)
        for r in rows:
            w.writerow([r.get(c, "") for c in header])
