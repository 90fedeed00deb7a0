"""A trace scenario file written from a trace and a few choices (``hollowscale trace to-scenario``).

A user who has a trace (Alibaba's, an excerpt, their own cluster's dump) should not have to learn the
scenario format's keys, or work out paths relative to a file that does not exist yet, to replay it.
:func:`scenario_doc` builds the document :mod:`hollowscale.scenario.trace` reads (paths relative to
the file's folder, as every scenario has them; a dump's reading options carried when they are not
the defaults, so the replay reads the trace the way it was checked here), :func:`scenario_text` writes
it with a comment header that says what it replays and how it was made, and :func:`write_scenario`
puts it on disk under the harness's rule: never overwrite or change a file it did not make, and leave
nothing behind when it fails (the file it made and any folder it made for it are removed).  What is
written is checked by reading it back with :func:`~hollowscale.scenario.trace.load_trace_scenario`
before success is said, so a file this leaves behind always passes ``hollowscale trace validate``.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from hollowscale.report.numbers import number
from hollowscale.scenario.trace import TraceScenario, TraceScenarioFile, load_trace_scenario
from hollowscale.trace import KIND_TITLES, KINDS, DumpOptions, Trace, inspect_trace
from hollowscale.trace.read import is_dump
from kubecore.schema import SpecError, validate

#: ``cluster.profile`` of a trace scenario (``TraceClusterSpec``; a unit test keeps the two the same)
CLUSTER_PROFILES = ("default", "scale")
#: the variants written when none is asked for: the committed scenario's comparison
DEFAULT_VARIANTS = ("default", "packing")
#: suffixes of a scenario file (``hollowscale run`` and ``validate`` read YAML)
SUFFIXES = (".yaml", ".yml")


@dataclass(frozen=True)
class VariantChoice:
    """One variant to write: a scheduler profile of :data:`~hollowscale.scenario.trace.PROFILES`, or a
    user's KubeSchedulerConfiguration file (exactly one of the two)."""

    name: str
    profile: str | None = None
    config: Path | None = None


def dns_label(text: str, fallback: str = "trace") -> str:
    """``text`` as a DNS label (lowercase, ``-`` for anything else, at most 63; ``fallback`` when nothing
    is left): a name taken from a file stem (``My_Trace.yaml``) must still be a valid scenario or
    variant name."""
    label = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")[:63].strip("-")
    return label or fallback


def variant_choices(profiles: Sequence[str], configs: Sequence[str | Path]) -> list[VariantChoice]:
    """The variants asked for: each profile named after itself, each configuration file after its stem;
    :data:`DEFAULT_VARIANTS` when none is asked for.  Names are not made unique here: a clash is the
    scenario's to refuse (``duplicate variant name``), so the user sees the rule it breaks."""
    out = [VariantChoice(p, profile=p) for p in profiles]
    out += [VariantChoice(dns_label(Path(c).stem, "mine"), config=Path(c)) for c in configs]
    return out or [VariantChoice(p, profile=p) for p in DEFAULT_VARIANTS]


def relative(path: str | Path, base: Path) -> str:
    """``path`` relative to the folder ``base``, as a scenario names its files (``base / result`` opens
    the same file).  Both folders are resolved first: a ``..`` out of a symlinked folder would
    otherwise lead somewhere else; the file's own name is kept (a symlinked trace stays named as
    given)."""
    p = Path(path)
    return os.path.relpath(p.parent.resolve() / p.name, base.resolve())


def dump_keys(pods: str | Path, nodes: str | Path | None, options: DumpOptions) -> dict[str, Any]:
    """``workload.trace``'s keys for how a dump is read, those that differ from the defaults (none for a
    CSV trace: the options do not apply to it)."""
    if not (is_dump(pods) or (nodes is not None and is_dump(nodes))):
        return {}
    default = DumpOptions()
    return {k: getattr(options, k) for k in ("gpu_resource", "model_label", "share_annotation", "daemonsets")
            if getattr(options, k) != getattr(default, k)}


def scenario_doc(*, name: str, pods: str | Path, nodes: str | Path | None, base: Path,
                 options: DumpOptions | None = None, description: str = "", mode: str = "paper",
                 demand: float | None = None, seeds: Sequence[int] | None = None, compress: float | None = None,
                 window: tuple[float | None, float | None] | None = None, cluster_profile: str = "scale",
                 variants: Sequence[VariantChoice] = (), gpus: str = "claims",
                 gpu_sharing: bool = True) -> dict[str, Any]:
    """The trace scenario document, as :class:`~hollowscale.scenario.trace.TraceScenarioFile` reads it,
    for a file in the folder ``base``.

    Files (the trace's, a variant's scheduler configuration) are written relative to ``base``, as the
    scenario resolves them.  The mode's keys are written as given, None left out: ``demand`` and
    ``seeds`` are the paper protocol's, ``compress`` and ``window`` (start and end in trace seconds,
    either None) the timed replay's; each mode refuses the other's, so the caller passes only its
    mode's.  ``gpus`` and ``gpu_sharing`` apply to every variant: the variants compare schedulers, not
    ways of asking for GPUs.  Nothing is checked here (:func:`write_scenario` checks what it writes).
    """
    trace: dict[str, Any] = {"pods": relative(pods, base)}
    if nodes is not None:
        trace["nodes"] = relative(nodes, base)
    trace["mode"] = mode
    if demand is not None:
        trace["demand"] = float(demand)
    if seeds is not None:
        trace["seeds"] = [int(s) for s in seeds]
    if compress is not None:
        trace["compress"] = _whole(compress)
    if window is not None and window != (None, None):
        trace["window"] = {k: _whole(v) for k, v in zip(("start_s", "end_s"), window, strict=True) if v is not None}
    trace.update(dump_keys(pods, nodes, options or DumpOptions()))
    docs = []
    for v in variants or variant_choices((), ()):
        scheduler = {"profile": v.profile} if v.config is None else {"config": relative(v.config, base)}
        docs.append({"name": v.name, "scheduler": scheduler, "gpus": gpus, "gpu_sharing": gpu_sharing})
    doc: dict[str, Any] = {"name": name}
    if description:
        doc["description"] = description
    doc.update({"cluster": {"profile": cluster_profile}, "workload": {"trace": trace}, "variants": docs})
    return doc


def _whole(v: float) -> float | int:
    """A whole number as one (``compress: 10000``, not ``10000.0``), any other as it is."""
    return int(v) if float(v).is_integer() else v


def _how(spec: dict[str, Any]) -> str:
    """How the scenario replays the trace, in words (the header's)."""
    if spec["mode"] == "paper":
        demand = spec.get("demand", 1.3)
        tuned = f"tuned to {number(float(demand), 2, trim=True)}x the GPU capacity" if demand else "as it is"
        return f"in the paper's protocol, {tuned}, seeds {', '.join(map(str, spec.get('seeds', [42])))}"
    if spec["mode"] == "timed":
        w = spec.get("window") or {}
        window = (f", trace seconds {number(w.get('start_s'), 0) if 'start_s' in w else 'start'} to "
                  f"{number(w.get('end_s'), 0) if 'end_s' in w else 'end'}" if w else "")
        return (f"time-faithfully (mode timed): each pod created and deleted at its trace times, "
                f"{number(spec.get('compress'), 2, trim=True)} trace seconds a second{window}")
    return f"in mode {spec['mode']}"


def _gpu_words(gpus: str, sharing: bool) -> str:
    if gpus == "counted":
        return "GPUs counted (nvidia.com/gpu, a share rounded up to a whole GPU)"
    return "GPUs as DRA devices, " + ("a share a claim of its milli-GPU" if sharing else "a share rounded up to a device")


def header(trace: Trace, doc: dict[str, Any], command: str, file: str | Path) -> str:
    """The comment lines above the document: what it replays (the trace's figures as ``hollowscale trace
    inspect`` counts them), the command that wrote it (to write it again, changed) and how to run it."""
    f = inspect_trace(trace)
    spec = doc["workload"]["trace"]
    kinds = ", ".join(f"{number(f['pods']['by_kind'][k]['pods'])} {KIND_TITLES[k]}" for k in KINDS
                      if f["pods"]["by_kind"][k]["pods"])
    ratio = f["demand"]["gpu_ratio"]
    asks = f", asking {number(ratio, 2, trim=True)}x the GPU capacity" if ratio is not None else ""
    variants = doc["variants"]
    first = variants[0]
    quoted = shlex.quote(str(file))
    lines = [
        f"{doc['name']}: a trace scenario written by `hollowscale trace to-scenario`.",
        f"It replays the trace {spec['pods']}" + (f" on {spec['nodes']}" if spec.get("nodes") else "")
        + " (relative to this file):",
        f"  {number(f['nodes']['total'])} nodes ({number(f['nodes']['gpu_nodes'])} with GPUs, "
        f"{number(f['nodes']['gpus'])} GPUs); {number(f['pods']['total'])} pods ({kinds or 'none'}){asks};",
        f"through the real kube-scheduler {_how(spec)};",
        f"variants, each on a fresh {doc['cluster']['profile']} cluster: {', '.join(v['name'] for v in variants)}; "
        f"{_gpu_words(first['gpus'], first['gpu_sharing'])}.",
    ]
    out = [*_wrap(lines), f"Written by: {command}", f"Run it:     hollowscale trace replay {quoted}",
           f"Check it:   hollowscale trace validate {quoted}"]
    # a line break in a path or an option would end the comment (and start YAML): written as backslash-n
    return "".join("# " + line.replace("\r", "\\r").replace("\n", "\\n") + "\n" for line in out)


def _wrap(lines: list[str], width: int = 110) -> list[str]:
    """Long comment lines cut at spaces, the rest indented under the first."""
    out: list[str] = []
    for line in lines:
        lead = line[: len(line) - len(line.lstrip(" "))]
        cur, more = lead, lead + "  "
        for w in line[len(lead):].split(" "):
            if len(cur) > len(lead) and len(cur) + 1 + len(w) > width:
                out.append(cur)
                cur = more + w
            else:
                cur = f"{cur} {w}" if len(cur) > len(lead) else cur + w
        out.append(cur)
    return out


class _Dumper(yaml.SafeDumper):
    """SafeDumper that indents a list under its key, as the committed scenarios are written."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)


def scenario_text(doc: dict[str, Any], comment: str = "") -> str:
    """The document as YAML under ``comment``: keys in the scenario's order, short mappings and lists on
    one line (``scheduler: {profile: default}``, ``seeds: [42]``) as the committed scenarios write them.
    Strings that YAML 1.1 would read as something else are quoted (the strict reader refuses them)."""
    body = yaml.dump(doc, Dumper=_Dumper, sort_keys=False, default_flow_style=None, allow_unicode=True, width=120)
    return comment + body


def command_line(args: Sequence[str], prog: str = "hollowscale trace to-scenario") -> str:
    """The shell command with ``args`` (quoted where the shell needs it)."""
    return " ".join([prog, *(shlex.quote(a) for a in args)])


class WriteRefused(Exception):
    """The scenario was not written (the file exists, or what would be written is refused); nothing
    was left behind.  ``str()`` says why, every problem included."""


def _missing_folders(folder: Path) -> list[Path]:
    """``folder`` and its ancestors that do not exist yet, innermost first (those a write would make)."""
    out = []
    while not folder.exists() and folder != folder.parent:
        out.append(folder)
        folder = folder.parent
    return out


def write_scenario(out: Path, doc: dict[str, Any], comment: str = "") -> TraceScenario:
    """Write ``doc`` to ``out`` (a new file, never an existing one) and read it back as the replay will.

    The file is made exclusively (``O_EXCL``): an existing file, folder or link at ``out`` is left as it
    was, even one that appears while this runs.  The document's shape is checked before anything is
    written; the trace and the variants' scheduler configurations once it is on disk (they are named
    relative to it).  When that check refuses it, the file and any folder made for it are removed
    (only those: a folder that holds anything else is kept).

    Raises:
        WriteRefused: why, with every problem; nothing written remains.
    """
    exists = f"{out} exists: not overwritten (choose another --out, or move it away yourself)"
    if os.path.lexists(out):
        raise WriteRefused(exists)
    try:
        validate(TraceScenarioFile, doc, str(out))
    except SpecError as exc:
        raise WriteRefused(f"the scenario would be refused; nothing written:\n{exc}") from None
    made = _missing_folders(out.parent)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        fh = out.open("x", encoding="utf-8")
    except FileExistsError:
        _undo(None, made)
        raise WriteRefused(exists if os.path.lexists(out) else f"cannot make the folder {out.parent}: a file is in "
                           "the way") from None
    except OSError as exc:
        _undo(None, made)
        raise WriteRefused(f"cannot write {out}: {exc}") from None
    try:
        with fh:
            fh.write(scenario_text(doc, comment))
        return load_trace_scenario(out)
    except SpecError as exc:
        _undo(out, made)
        raise WriteRefused(f"the scenario written was refused, so {out} was removed:\n{exc}") from None
    except BaseException:
        _undo(out, made)
        raise


def _undo(file: Path | None, folders: list[Path]) -> None:
    """Remove the file this wrote and the folders it made for it, innermost first; a folder that holds
    anything else (someone else's) stays."""
    if file is not None:
        file.unlink(missing_ok=True)
    for folder in folders:
        try:
            folder.rmdir()
        except OSError:
            break

