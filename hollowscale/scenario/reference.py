"""The scenario field reference (``docs/scenario-reference.md``), written from the typed model.

Why generated: a hand-kept list of fields drifts from the code the day a field is added.  This module
walks :class:`~hollowscale.scenario.model.ScenarioFile` (and the engines' specs it composes:
``hollow.pools.PoolSpec``, ``loadgen.spec.WorkloadSpec``, ``loadgen.spec.ArrivalSpec``, ...) and
:class:`~hollowscale.scenario.trace.TraceScenarioFile`, and writes every field with its path, type,
allowed values, default and description.  The descriptions are the models' own: the ``Attributes:``
section of the class docstring, else the comment on the field's line, else pydantic's
``Field(description=...)``.  The type words come from the validators themselves (``one_of`` choices,
``number`` bounds, and for any other leaf the "expected ..." phrase its validator answers a wrong value
with), so the reference says what validation says.

``python -m hollowscale.scenario.reference`` rewrites the file; ``--check`` exits 1 when the committed
file differs (``tests/unit/test_docs.py`` does the same in-process).
"""

from __future__ import annotations

import argparse
import inspect
import io
import re
import sys
import tokenize
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, ForwardRef, Literal, Union, get_args, get_origin, get_type_hints

import yaml
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from hollowscale.paths import REPO_ROOT
from hollowscale.scenario.model import ScenarioFile
from hollowscale.scenario.trace import TraceScenarioFile
from kubecore.distributions import DIST_KEYS

#: where the reference lives in the repository
REFERENCE_PATH = REPO_ROOT / "docs" / "scenario-reference.md"
#: the command that rewrites it (named by the test when the file is stale)
REGENERATE = ".venv/bin/python -m hollowscale.scenario.reference"

_BASE_WORDS = {bool: "true or false", int: "integer", float: "number", str: "string"}


@dataclass(frozen=True)
class Row:
    """One field: its name in the file, its type in words, its default and what it means."""

    name: str
    type: str
    default: str
    description: str


@dataclass(frozen=True)
class Section:
    """One model at the first path it is found at (``pools[].lifecycle``), with its fields."""

    path: str
    model: type[BaseModel]
    summary: str
    rows: tuple[Row, ...]
    also_at: tuple[str, ...]

    @property
    def anchor(self) -> str:
        return anchor(self.path)


def anchor(path: str) -> str:
    """An HTML id for a section path (``pools[].lifecycle`` -> ``pools-lifecycle``)."""
    return re.sub(r"[^a-z0-9]+", "-", path.lower()).strip("-") or "top"


# ------------------------------------------------------------------------------------------- docstrings


def _rst_to_md(text: str) -> str:
    """Docstring markup in Markdown: ````x```` -> `` `x` ``, ``:class:`~a.B``` -> `` `B` ``."""
    text = re.sub(r":[a-z]+:`~[\w.]*?\.?(\w+)`", r"`\1`", text)
    text = re.sub(r":[a-z]+:`([^`]+)`", r"`\1`", text)
    return text.replace("``", "`")


def _one_line(text: str) -> str:
    return " ".join(_rst_to_md(text).split()).replace("|", "\\|")


def _split_docstring(model: type[BaseModel]) -> tuple[str, dict[str, str]]:
    """The docstring's text before ``Attributes:``, and each attribute's description."""
    doc = inspect.cleandoc(model.__doc__ or "")
    head, _, attrs = doc.partition("\nAttributes:\n")
    found: dict[str, str] = {}
    current: list[str] = []
    for line in attrs.splitlines():
        m = re.match(r"^ {4}(\w[\w, ]*?):\s+(.*)$", line)
        if m:  # ``name: text``, or ``a, b: text`` for fields described together
            current = [name.strip() for name in m.group(1).split(",")]
            found.update(dict.fromkeys(current, m.group(2)))
        elif line.startswith("        ") and current:
            for name in current:
                found[name] += " " + line.strip()
        elif line.strip():
            current = []  # text after the attribute list
    return head.strip(), found


def _line_comments(model: type[BaseModel]) -> dict[str, str]:
    """``name: type = default  # comment`` in the class body: field name -> comment."""
    try:
        source = inspect.getsource(model)
    except (OSError, TypeError):
        return {}
    out: dict[str, str] = {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type != tokenize.COMMENT or tok.string.startswith("# type:"):
            continue
        line = tok.line
        m = re.match(r"^ {4}(\w+)\s*:", line)
        if m and line.lstrip() != tok.string:
            out[m.group(1)] = re.sub(r"\s*# type: ignore\[[^\]]*\]", "", tok.string).lstrip("# ").strip()
    return out


# ------------------------------------------------------------------------------------------- types

#: kubecore.schema's leaf validators that many fields share: a short term in the tables, explained once in
#: the glossary by the validator's own "expected ..." phrase (distributions by kubecore.distributions)
_TERMS: dict[str, str] = {
    "_seconds": "duration", "_seconds_forever": "duration or `forever`", "_dist": "distribution",
    "_finite_dist": "distribution (finite)", "_quantity": "quantity", "_dns_label": "DNS label",
    "_dns_subdomain": "DNS subdomain", "check_qualified_name": "qualified name", "check_label_value": "label value",
}


def _leaf_function(metadata: Sequence[Any]) -> Callable[[Any], Any] | None:
    """The user function inside :func:`kubecore.schema.leaf`'s validator, the first one in ``metadata``."""
    for item in metadata:
        func = getattr(item, "func", None)
        if func is not None and getattr(func, "__qualname__", "") == "leaf.<locals>.run":
            fn = _closure(func).get("fn")
            if callable(fn):
                return fn
    return None


def _closure(fn: Callable[..., Any]) -> dict[str, Any]:
    code = getattr(fn, "__code__", None)
    cells = getattr(fn, "__closure__", None) or ()
    return {name: cell.cell_contents for name, cell in zip(code.co_freevars if code else (), cells, strict=False)}


def _expected_phrase(fn: Callable[[Any], Any]) -> str | None:
    """What the validator says it expected when given something it cannot take (``a DNS label (...)``)."""
    try:
        fn(object())
    except Exception as exc:  # every leaf validator words a wrong value as "expected X, got Y"
        wording = getattr(exc, "message", None)  # pydantic's own errors word it in message()
        message = str(wording()) if callable(wording) else str(exc)
        m = re.match(r"^expected (.*?),? got ", message, re.S)
        if m:
            return re.sub(r"^an? ", "", m.group(1).strip())
    return None


def _distribution_words(finite: bool) -> str:
    """The distribution grammar, from :data:`kubecore.distributions.DIST_KEYS`."""
    kinds = []
    for kind, (required, optional) in DIST_KEYS.items():
        if kind in ("fixed", "forever"):
            continue
        keys = ", ".join(required) + (f"; optional {', '.join(optional)}" if optional else "")
        kinds.append(f"`{kind}` ({keys})")
    return ("a duration" + ("" if finite else ", `forever`") + ", or `{dist: KIND, ...}` with KIND one of "
            + ", ".join(kinds) + " (durations as Go durations or seconds)")


def _number(value: float) -> str:
    return f"{int(value):,}" if float(value).is_integer() else f"{value:g}"


class _Walk:
    """One model's fields in words: the models they hold (to walk next) and the glossary terms they use."""

    def __init__(self, terms: dict[str, str]) -> None:
        self.terms = terms
        self.nested: list[tuple[str, type[BaseModel]]] = []

    def leaf(self, fn: Callable[[Any], Any]) -> str | None:
        """A leaf type in words: choices, bounds, a glossary term, or the validator's own "expected" phrase."""
        qual = getattr(fn, "__qualname__", "")
        cells = _closure(fn)
        if qual.startswith("one_of."):
            return "one of " + ", ".join(f"`{c}`" for c in cells["choices"])
        if qual.startswith("number."):
            lo, hi = cells.get("lo"), cells.get("hi")
            bounds = ([f"{'>' if cells.get('lo_open') else '>='} {_number(lo)}"] if lo is not None else []) \
                + ([f"<= {_number(hi)}"] if hi is not None else [])
            return ("integer" if cells.get("integer") else "number") + (" " + ", ".join(bounds) if bounds else "")
        if qual.startswith("_string_map."):
            term = "labels" if cells.get("check_value") else "annotations"
            self.terms[term] = ("label keys (qualified names) to label values" if term == "labels"
                                else "qualified names to strings")
            return term
        name = getattr(fn, "__name__", "")
        if getattr(fn, "__module__", "") == "kubecore.schema" and name in _TERMS:
            term = _TERMS[name]
            self.terms[term] = (_distribution_words(finite=name == "_finite_dist") if "dist" in name
                                else _expected_phrase(fn) or term)
            return term
        return _expected_phrase(fn)

    def describe(self, tp: Any, metadata: Sequence[Any], path: str) -> str:
        """``tp`` in words; the models it holds are kept in :attr:`nested` with their paths."""
        if get_origin(tp) is Annotated:
            base, *more = get_args(tp)
            return self.describe(base, [*more, *metadata], path)
        fn = _leaf_function(metadata)
        if fn is not None:
            words = self.leaf(fn)
            if words:
                return words
        origin = get_origin(tp)
        if origin in (Union, types.UnionType):
            args = [a for a in get_args(tp) if a is not type(None)]
            return " or ".join(self.describe(a, metadata if len(args) == 1 else (), path) for a in args)
        if origin is Literal:
            return "one of " + ", ".join(f"`{a}`" for a in get_args(tp))
        if origin is tuple:
            args = [a for a in get_args(tp) if a is not Ellipsis]
            return "list of " + (self.describe(args[0], (), path + "[]") if args else "items")
        if origin is dict:
            key, value = get_args(tp)
            return f"mapping of {self.describe(key, (), path)} to {self.describe(value, (), path + '.*')}"
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            self.nested.append((path, tp))
            return f"mapping: [`{path}`](#{anchor(path)})"
        if isinstance(tp, type):
            return _BASE_WORDS.get(tp, tp.__name__)
        return str(tp)


def _default_text(info: FieldInfo) -> str:
    if info.default_factory is not None:
        value: Any = info.default_factory()  # type: ignore[call-arg]
    elif info.default is PydanticUndefined:
        return "**required**"
    else:
        value = info.default
    if value is None:
        return "unset"
    if isinstance(value, BaseModel):
        given = value.model_dump(exclude_defaults=True, mode="json")
        return f"`{_yaml(given)}`" if given else "`{}`"
    to_doc = getattr(value, "to_doc", None)
    if callable(to_doc):
        value = to_doc()
    return f"`{_yaml(value)}`"


def _yaml(value: Any) -> str:
    if isinstance(value, tuple):
        value = [_plain(v) for v in value]
    value = _plain(value)
    text = yaml.safe_dump(value, default_flow_style=True, width=10_000).strip()
    return text.removesuffix("\n...").removesuffix("...").strip().replace("|", "\\|")


def _plain(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(exclude_defaults=True, mode="json")
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


# ------------------------------------------------------------------------------------------- the walk


def sections(root: type[BaseModel], root_path: str, terms: dict[str, str] | None = None) -> list[Section]:
    """Every model under ``root``, depth first, each once (at the first path it is met; later paths listed);
    the glossary terms the tables use are added to ``terms``."""
    terms = {} if terms is None else terms
    out: dict[type[BaseModel], Section] = {}
    order: list[type[BaseModel]] = []
    pending: list[tuple[str, type[BaseModel]]] = [(root_path, root)]
    while pending:
        path, model = pending.pop(0)
        if model in out:
            s = out[model]
            out[model] = Section(s.path, s.model, s.summary, s.rows, (*s.also_at, path))
            continue
        summary, attrs = _split_docstring(model)
        comments = _line_comments(model)
        rows: list[Row] = []
        walk = _Walk(terms)
        for name, info in model.model_fields.items():
            key = info.alias or name
            child = f"{path}.{key}" if path else key
            annotation = info.annotation
            if isinstance(annotation, ForwardRef):  # pydantic resolves it at first use; typing can now
                annotation = get_type_hints(model, include_extras=True)[name]
            words = walk.describe(annotation, info.metadata, child)
            text = attrs.get(name) or comments.get(name) or info.description or _held_summary(walk.nested, child)
            rows.append(Row(key, words, _default_text(info), _one_line(text)))
        out[model] = Section(path, model, _rst_to_md(summary), tuple(rows), ())
        order.append(model)
        pending = walk.nested + pending  # depth first: a section's models right after it
    return [out[m] for m in order]


def _held_summary(nested: Sequence[tuple[str, type[BaseModel]]], path: str) -> str:
    """For a field that holds a model and says nothing itself: the first sentence of that model's docstring."""
    for at, model in nested:
        if at in (path, path + "[]"):
            head = _split_docstring(model)[0]
            return re.split(r"(?<=\.)\s", " ".join(head.split()), maxsplit=1)[0] if head else ""
    return ""


def _render_section(s: Section, title: str) -> list[str]:
    ids = [s.anchor, *(anchor(p) for p in s.also_at)]  # the later paths' links land here too
    lines = ["".join(f'<a id="{i}"></a>' for i in ids), "", f"### {title}", ""]
    lines.append(f"*{s.model.__module__}.{s.model.__qualname__}*"
                 + (f"; also at {', '.join(f'`{p}`' for p in s.also_at)}" if s.also_at else ""))
    lines.append("")
    if s.summary:
        lines += [s.summary, ""]
    lines += ["| field | type | default | description |", "|---|---|---|---|"]
    for r in s.rows:
        lines.append(f"| `{r.name}` | {r.type} | {r.default} | {r.description} |")
    lines.append("")
    return lines


def render() -> str:
    """The whole reference, as committed in ``docs/scenario-reference.md``."""
    terms: dict[str, str] = {}
    plain = sections(ScenarioFile, "", terms)
    trace = sections(TraceScenarioFile, "trace", terms)
    lines = [
        "# Scenario file reference",
        "",
        "For whoever writes or reviews a scenario file: every field, its type, default and meaning.",
        "",
        f"Generated from the typed model by `{REGENERATE}` (`hollowscale/scenario/reference.py`);",
        "do not edit it by hand: `tests/unit/test_docs.py` fails when this file and the model disagree. How to",
        "run a scenario, validate it and read its report: [scenarios.md](scenarios.md).",
        "",
        "Paths use `[]` for the items of a list (`pools[].lifecycle`) and `.*` for the values of a mapping. A",
        "field whose name ends in `_s` is in seconds, `_pct` in percent. Unknown keys are refused everywhere, and",
        "validation reports every problem at once (`hollowscale validate FILE`).",
        "",
        "| type | what validation accepts |",
        "|---|---|",
        *(f"| {term} | {_one_line(text)} |" for term, text in sorted(terms.items(), key=lambda t: t[0].lower())),
        "",
        "Sections: " + ", ".join(f"[`{s.path or 'top level'}`](#{s.anchor})" for s in plain) + ".",
        "Trace scenarios: " + ", ".join(f"[`{s.path}`](#{s.anchor})" for s in trace) + ".",
        "",
        "## Scenarios (`hollowscale run`, `hollowscale plan`)",
        "",
    ]
    for s in plain:
        lines += _render_section(s, f"`{s.path}`" if s.path else "The file (top level)")
    lines += [
        "## Trace scenarios (`workload: {trace: ...}`, `hollowscale trace replay`)",
        "",
        "A file whose `workload` is a trace is a trace scenario: its nodes are the trace's, so it has no",
        "`pools`, `workloads` or `arrival`. The trace's own format: [trace-format.md](trace-format.md).",
        "",
    ]
    for s in trace:
        title = f"`{s.path.removeprefix('trace.')}` (trace scenario)" if s.path != "trace" else "The trace scenario file"
        lines += _render_section(s, title)
    return "\n".join(lines).rstrip() + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Write the reference (or, with ``--check``, say whether the committed one is current)."""
    parser = argparse.ArgumentParser(prog="python -m hollowscale.scenario.reference",
                                     description="Write docs/scenario-reference.md from the typed scenario model.")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 when the file is not current")
    parser.add_argument("--out", type=Path, default=REFERENCE_PATH, help="where to write (default: %(default)s)")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = args.out.read_text() if args.out.exists() else ""
        if current != text:
            print(f"{args.out} is not current: run {REGENERATE}", file=sys.stderr)
            return 1
        return 0
    args.out.write_text(text)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
