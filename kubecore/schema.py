"""One validation policy for every file a user writes (scenarios, pools, stages, load specs).

Specs are pydantic v2 models derived from :class:`Spec`: frozen, strict (``"5"`` is not an integer,
``1`` is not a string), unknown keys refused.  Every error is collected, not only the first, and each
names the file, the field path (``workloads[2].roles[0].resources.cpu``), what was given and what was
expected.  Leaf types (durations, distributions, quantities, names, bounded numbers) are
``Annotated`` validators defined here, so every engine words the same mistake the same way.

Checks that span several fields live in ``@model_validator(mode="after")`` methods that call
:func:`raise_problems` with all the problems they found at once.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar, get_args, get_origin

from pydantic import BaseModel, ConfigDict, PlainValidator, ValidationError, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

from kubecore.distributions import DistError, DurationDist, parse_dist
from kubecore.durations import to_seconds
from kubecore.quantity import parse_quantity
from kubecore.wording import show

# ------------------------------------------------------------------------------------------------ errors


@dataclass(frozen=True)
class FieldError:
    """One problem in a file.

    Attributes:
        path: dotted/indexed field path, e.g. ``workloads[2].roles[0].resources.cpu`` ("" for the root).
        message: what was expected and what was found.
    """

    path: str
    message: str

    def render(self, source: str) -> str:
        """``source: path: message`` (the path left out for the whole document)."""
        where = f"{source}: {self.path}" if self.path else source
        return f"{where}: {self.message}"


class SpecError(ValueError):
    """A file that cannot be used; ``errors`` holds every problem found, each on its own line."""

    def __init__(self, source: str, errors: Iterable[FieldError]):
        self.source = source
        self.errors = list(errors)
        lines = [e.render(source) for e in self.errors]
        super().__init__("\n".join(lines) if lines else f"{source}: invalid")


def problem(message: str, key: str = "") -> PydanticCustomError:
    """An error raised by our validators; ``key`` is appended to the field path (e.g. ``dist``)."""
    return PydanticCustomError("spec", "{message}", {"message": message, "key": key})


def raise_problems(model: str, problems: Iterable[tuple[tuple[str | int, ...], str]]) -> None:
    """Raise all ``(loc, message)`` problems of a model validator at once (nothing when empty)."""
    details = [InitErrorDetails(type=problem(msg), loc=loc, input=None) for loc, msg in problems]
    if details:
        raise ValidationError.from_exception_data(model, details)


def path_of(loc: Iterable[str | int]) -> str:
    """``('workloads', 0, 'roles')`` -> ``workloads[0].roles``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _model_at(root: type[BaseModel], loc: tuple[str | int, ...]) -> type[BaseModel] | None:
    """The model class that the path ``loc`` leads into, for 'unknown key' hints."""
    current: Any = root
    for part in loc:
        current = _unwrap(current)
        if isinstance(part, int):
            items = [a for a in get_args(current) if a is not Ellipsis]
            current = items[0] if items else None
        elif isinstance(current, type) and issubclass(current, BaseModel):
            info = next((f for n, f in current.model_fields.items() if (f.alias or n) == part), None)
            current = info.annotation if info else None
        elif get_origin(current) in (dict, Mapping):
            args = get_args(current)
            current = args[1] if len(args) == 2 else None
        else:
            return None
    current = _unwrap(current)
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _unwrap(tp: Any) -> Any:
    """Strip ``Annotated`` and ``X | None`` from a type."""
    while True:
        if get_origin(tp) is Annotated:
            tp = get_args(tp)[0]
            continue
        args = [a for a in get_args(tp) if a is not type(None)]
        is_union = get_origin(tp) is type(int | None) or str(get_origin(tp)) == "typing.Union"
        if is_union and len(args) == 1:
            tp = args[0]
            continue
        return tp


_TYPE_WORDS = {
    "model_type": "a mapping", "dict_type": "a mapping", "model_attributes_type": "a mapping",
    "list_type": "a list", "tuple_type": "a list", "string_type": "a string", "bool_type": "true or false",
    "int_type": "an integer", "float_type": "a number", "int_from_float": "an integer",
}


def field_errors(exc: ValidationError, root: type[BaseModel]) -> list[FieldError]:
    """pydantic's errors in our words: field path, what was expected, what was given."""
    out: list[FieldError] = []
    for err in exc.errors(include_url=False):
        loc = tuple(err["loc"])
        typ, given, ctx = err["type"], err.get("input"), err.get("ctx") or {}
        if typ == "spec":
            key = ctx.get("key") or ""
            out.append(FieldError(path_of(loc + ((key,) if key else ())), str(ctx.get("message"))))
            continue
        if typ == "missing":
            msg = "is required"
        elif typ == "extra_forbidden":
            model = _model_at(root, loc[:-1])
            known = sorted((f.alias or n) for n, f in model.model_fields.items()) if model else []
            msg = "unknown key" + (f" (expected one of: {', '.join(known)})" if known else "")
        elif typ in _TYPE_WORDS:
            msg = f"expected {_TYPE_WORDS[typ]}, got {show(given)}"
        elif typ == "too_short":
            msg = f"expected at least {ctx.get('min_length')} item(s), got {ctx.get('actual_length')}"
        elif typ == "too_long":
            msg = f"expected at most {ctx.get('max_length')} item(s), got {ctx.get('actual_length')}"
        else:
            msg = f"{err['msg']}, got {show(given)}"
        out.append(FieldError(path_of(loc), msg))
    return out


M = TypeVar("M", bound=BaseModel)


def validate(model: type[M], doc: Any, source: str, context: dict[str, Any] | None = None) -> M:
    """``model`` from ``doc``, or :class:`SpecError` listing every problem with ``source``.

    ``context`` reaches validators as pydantic's validation context (e.g. the folder that relative
    file names in the document are resolved against).
    """
    try:
        return model.model_validate(doc, context=context)
    except ValidationError as exc:
        raise SpecError(source, field_errors(exc, model)) from None


class Spec(BaseModel):
    """Base of every user-written spec: frozen, strict, unknown keys refused.

    Strict mode keeps ``"5"`` from becoming 5 and ``"yes"`` from becoming True; it would also refuse
    a YAML list for a ``tuple[...]`` field, so lists given for tuple fields are turned into tuples
    first.  Declare sequences as ``tuple[X, ...]`` (frozen specs hold no mutable lists).
    """

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, arbitrary_types_allowed=True,
                              hide_input_in_errors=False, validate_default=False)

    @model_validator(mode="before")
    @classmethod
    def _lists_to_tuples(cls, data: Any) -> Any:
        if isinstance(data, Mapping):
            fields = _tuple_fields(cls)
            if any(isinstance(data.get(k), list) for k in fields):
                return {k: tuple(v) if k in fields and isinstance(v, list) else v for k, v in data.items()}
        return data


_TUPLE_FIELDS: dict[type, frozenset[str]] = {}


def _tuple_fields(cls: type[BaseModel]) -> frozenset[str]:
    """Names (aliases) of ``cls``'s fields declared as tuples (cached per class)."""
    found = _TUPLE_FIELDS.get(cls)
    if found is None:
        found = frozenset((f.alias or n) for n, f in cls.model_fields.items()
                          if get_origin(_unwrap(f.annotation)) is tuple)
        _TUPLE_FIELDS[cls] = found
    return found


# ------------------------------------------------------------------------------------------------ leaf types


def leaf(fn: Callable[[Any], Any]) -> PlainValidator:
    """A validator that runs ``fn``; its ``ValueError`` becomes one problem worded at the field's path.

    Problems raised as :func:`problem` (which may name a key below the field) and the collected
    problems of :func:`raise_problems` pass through unchanged.
    """

    def run(value: Any) -> Any:
        try:
            return fn(value)
        except (PydanticCustomError, ValidationError):
            raise  # already worded, and may name a key below this field
        except DistError as exc:
            raise problem(exc.message, exc.key) from None
        except ValueError as exc:
            raise problem(str(exc)) from None

    return PlainValidator(run)


def _seconds(value: Any) -> float:
    return to_seconds(value)


def _seconds_forever(value: Any) -> float:
    return to_seconds(value, allow_forever=True)


def _dist(value: Any) -> DurationDist:
    return value if isinstance(value, DurationDist) else parse_dist(value)


def _finite_dist(value: Any) -> DurationDist:
    return value if isinstance(value, DurationDist) else parse_dist(value, allow_forever=False)


#: seconds: a number or a Go duration string (``90s``, ``1h30m``)
Seconds = Annotated[float, leaf(_seconds)]
#: seconds, ``forever`` allowed (``inf``)
SecondsOrForever = Annotated[float, leaf(_seconds_forever)]
#: a duration distribution (see :mod:`kubecore.distributions`)
Dist = Annotated[DurationDist, leaf(_dist)]
#: a duration distribution that ends
FiniteDist = Annotated[DurationDist, leaf(_finite_dist)]


def _quantity(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError(f"expected a Kubernetes quantity such as '500m', '64Gi' or '8', got {show(value)}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"expected a Kubernetes quantity such as '500m', '64Gi' or '8', got {value!r}")
    q = parse_quantity(value)
    if q < 0:
        raise ValueError(f"expected a quantity >= 0, got {value!r}")
    return str(value)


#: a non-negative Kubernetes quantity, kept as the string the user wrote (``500m``, ``64Gi``, ``8``)
Quantity = Annotated[str, leaf(_quantity)]

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
RESOURCE_NAME = re.compile(r"^([a-z0-9.-]+/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


def _dns_label(value: Any) -> str:
    if not isinstance(value, str) or len(value) > 63 or not DNS_LABEL.match(value):
        raise ValueError(f"expected a lowercase DNS label (a-z, 0-9, '-', at most 63 characters), got {show(value)}")
    return value


#: a DNS-1123 label (names of namespaces, pools, workloads, roles)
DnsLabel = Annotated[str, leaf(_dns_label)]


def _dns_subdomain(value: Any) -> str:
    if not isinstance(value, str) or len(value) > 253 or not DNS_SUBDOMAIN.match(value):
        raise ValueError(f"expected a lowercase DNS subdomain (a-z, 0-9, '-', '.'), got {show(value)}")
    return value


#: a DNS-1123 subdomain (scheduler names, priority class names)
DnsSubdomain = Annotated[str, leaf(_dns_subdomain)]


def check_qualified_name(key: Any) -> str:
    """A label/annotation/taint key: ``[prefix/]name``, prefix a DNS subdomain, name <= 63 characters."""
    if not isinstance(key, str):
        raise ValueError(f"expected a qualified name such as example.com/name, got {show(key)}")
    prefix, _, name = key.rpartition("/")
    if (prefix and (len(prefix) > 253 or not DNS_SUBDOMAIN.match(prefix))) or len(name) > 63 \
            or not LABEL_NAME.match(name):
        raise ValueError(f"expected a qualified name such as example.com/name (name <= 63 characters), got {key!r}")
    return key


def check_label_value(value: Any) -> str:
    """A label value: <= 63 characters, alphanumeric at both ends, '-', '_' or '.' inside."""
    if not isinstance(value, str) or len(value) > 63 or not LABEL_VALUE.match(value):
        raise ValueError(f"expected a label value (<= 63 characters, alphanumeric, '-', '_' or '.'), got {show(value)}")
    return value


#: a label, annotation or taint key (``[prefix/]name``)
QualifiedName = Annotated[str, leaf(check_qualified_name)]
#: a label value (may be empty)
LabelValue = Annotated[str, leaf(check_label_value)]


def validator_of(annotated: Any) -> Any:
    """The validator inside one of this module's ``Annotated`` leaf types.

    ``one_of`` and ``number`` build their types at run time, which a type checker cannot read; a spec
    can state the precise static type and still be checked and worded the same way:
    ``Annotated[int, validator_of(number(0, 255, integer=True))]``.
    """
    return get_args(annotated)[1]


def _string_map(check_value: bool) -> Callable[[Any], dict[str, str]]:
    def run(value: Any) -> dict[str, str]:
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise ValueError(f"expected a mapping of strings, got {show(value)}")
        out: dict[str, str] = {}
        for key, raw in value.items():
            try:
                check_qualified_name(key)
            except ValueError as exc:
                raise problem(str(exc), str(key)) from None
            if isinstance(raw, bool) or not isinstance(raw, str):
                raise problem(f"expected a string value (quote numbers), got {show(raw)}", str(key))
            if check_value:
                try:
                    check_label_value(raw)
                except ValueError as exc:
                    raise problem(str(exc), str(key)) from None
            out[key] = raw
        return out

    return run


#: label keys and values as Kubernetes accepts them
Labels = Annotated[dict[str, str], leaf(_string_map(True))]
#: annotation keys as Kubernetes accepts them, any string values
Annotations = Annotated[dict[str, str], leaf(_string_map(False))]


def one_of(*choices: str) -> Any:
    """A string that must be one of ``choices`` (``expected one of a, b, got 'c'``)."""

    def run(value: Any) -> str:
        if not isinstance(value, str) or value not in choices:
            got = repr(value) if isinstance(value, str) else show(value)
            raise ValueError(f"expected one of {', '.join(choices)}, got {got}")
        return value

    return Annotated[str, leaf(run)]


def number(lo: float | None = None, hi: float | None = None, *, lo_open: bool = False,
           integer: bool = False) -> Any:
    """A finite number (or integer) within bounds, worded ``expected a number > 0, got 0``."""
    kind = "an integer" if integer else "a number"

    def run(value: Any) -> float | int:
        if isinstance(value, bool) or not isinstance(value, int | float) or (integer and not isinstance(value, int)):
            raise ValueError(f"expected {kind}, got {show(value)}")
        if not math.isfinite(value):
            raise ValueError(f"expected a finite number, got {value!r}")
        if lo is not None and (value <= lo if lo_open else value < lo):
            raise ValueError(f"expected {kind} {'>' if lo_open else '>='} {lo:g}, got {value!r}")
        if hi is not None and value > hi:
            raise ValueError(f"expected {kind} <= {hi:g}, got {value!r}")
        return value if integer else float(value)

    return Annotated[int if integer else float, leaf(run)]
