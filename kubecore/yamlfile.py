"""Read a YAML file the way a careful reader would, not the way YAML 1.1 lets you.

PyYAML's ``safe_load`` silently accepts things that turn a typo into a wrong run:

- a key given twice keeps the last value (``count: 10`` ... ``count: 1000``);
- ``yes``/``no``/``on``/``off``/``y``/``n`` become booleans (``country: no``), ``1:30`` becomes 90,
  ``0755`` an octal number, ``1e3`` a *string*;
- anchors and aliases can expand a small file into gigabytes ("billion laughs"), and deep nesting
  makes the parser crawl.

:func:`load_yaml` refuses all of these with the file, line and column, and caps the input size, so a
spec file can never hang or exhaust memory while it is read.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from kubecore.schema import FieldError, SpecError

#: no spec file we read is anywhere near this (the largest shipped one is a few KiB)
MAX_BYTES = 1 << 20
#: deeper nesting than any spec needs (a scenario is about 6 levels deep)
MAX_DEPTH = 64

_AMBIGUOUS_BOOL = re.compile(r"^(y|Y|yes|Yes|YES|n|N|no|No|NO|on|On|ON|off|Off|OFF)$")
_SEXAGESIMAL = re.compile(r"^[-+]?[0-9][0-9_]*(:[0-5]?[0-9])+(\.[0-9_]*)?$")
_LEADING_ZERO = re.compile(r"^[-+]?0[0-9_]+$")


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader with YAML 1.2-like scalars and no duplicate keys or aliases."""


def _at(mark: Any) -> str:
    return f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else "somewhere"


def _where(node: yaml.Node) -> str:
    return _at(node.start_mark)


class _Refused(Exception):
    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    loader.flatten_mapping(node)
    seen: dict[Any, yaml.Node] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        try:
            hash(key)
        except TypeError:
            raise _Refused(f"{_where(key_node)}: a mapping key must be a plain value") from None
        if key in seen:
            raise _Refused(f"{_where(key_node)}: key {key!r} given twice (first at {_where(seen[key])}); "
                           "YAML would silently keep the last one")
        seen[key] = key_node
    return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)


def _construct_bool(loader: _StrictLoader, node: yaml.ScalarNode) -> bool:
    if _AMBIGUOUS_BOOL.match(node.value):
        raise _Refused(f"{_where(node)}: {node.value!r} is a boolean in YAML 1.1 and a string elsewhere; "
                       f"write true/false, or quote it (\"{node.value}\")")
    return bool(loader.construct_yaml_bool(node))


def _construct_int(loader: _StrictLoader, node: yaml.ScalarNode) -> int:
    if _SEXAGESIMAL.match(node.value):
        raise _Refused(f"{_where(node)}: {node.value!r} reads as a base-60 number in YAML 1.1; "
                       "write a duration such as '1m30s', or quote it")
    if _LEADING_ZERO.match(node.value):
        raise _Refused(f"{_where(node)}: {node.value!r} has a leading zero (an octal number in YAML 1.1); "
                       "drop the zero, or quote it")
    return int(loader.construct_yaml_int(node))


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
_StrictLoader.add_constructor("tag:yaml.org,2002:bool", _construct_bool)
_StrictLoader.add_constructor("tag:yaml.org,2002:int", _construct_int)
# YAML 1.2 floats: 1e3 and 1.5e-3 are numbers (PyYAML's 1.1 resolver needs a dot)
_StrictLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def _prescan(text: str) -> None:
    """Refuse aliases and nesting deeper than :data:`MAX_DEPTH` before anything is built.

    PyYAML's scanner slows down quadratically with nesting depth (20,000 levels take minutes); the
    events come lazily, so stopping at the first event past the limit costs almost nothing.
    """
    loader = _StrictLoader(text)
    depth = 0
    try:
        while loader.check_event():
            event = loader.get_event()
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_DEPTH:
                    raise _Refused(f"{_at(event.start_mark)}: nested deeper than {MAX_DEPTH} levels")
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
            elif isinstance(event, yaml.AliasEvent):
                raise _Refused(f"{_at(event.start_mark)}: aliases (*name) are not accepted in spec files; "
                               "write the value out")
    finally:
        loader.dispose()


def parse_yaml(text: str, source: str) -> Any:
    """The document in ``text``; :class:`SpecError` (naming ``source``, line and column) when refused."""
    if len(text) > MAX_BYTES:
        raise SpecError(source, [FieldError("", f"file too large ({len(text)} bytes, at most {MAX_BYTES})")])
    try:
        _prescan(text)
        loader = _StrictLoader(text)
        try:
            return loader.get_single_data()
        finally:
            loader.dispose()
    except _Refused as exc:
        raise SpecError(source, [FieldError("", f"not accepted ({exc.message})")]) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        raise SpecError(source, [FieldError("", f"not valid YAML ({where}{getattr(exc, 'problem', None) or exc})")]) \
            from None
    except (RecursionError, ValueError, OverflowError) as exc:
        raise SpecError(source, [FieldError("", f"not valid YAML ({exc.__class__.__name__}: {exc})")]) from None


def load_yaml(path: str | Path) -> Any:
    """Read and parse a spec file with :func:`parse_yaml`; missing or unreadable files are a SpecError."""
    source = str(path)
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_BYTES + 1)
    except FileNotFoundError:
        raise SpecError(source, [FieldError("", "file not found")]) from None
    except IsADirectoryError:
        raise SpecError(source, [FieldError("", "is a directory, expected a YAML file")]) from None
    except OSError as exc:
        raise SpecError(source, [FieldError("", f"cannot read: {exc.strerror}")]) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError(source, [FieldError("", f"not UTF-8 text (byte {exc.start})")]) from None
    return parse_yaml(text, source)
