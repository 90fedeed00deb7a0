"""A small subset of CEL, enough to evaluate the device selectors users usually write on the devices the
pools publish before a run: who can tell at ``validate`` that no GPU matches.

Read: ``device.driver``, ``device.attributes['<domain>'].<name>``, ``device.capacity['<domain>'].<name>``;
string, integer and boolean literals; ``==``, ``!=``, ``<``, ``<=``, ``>``, ``>=``; ``X.compareTo(quantity('40Gi'))``
and ``X.compareTo(semver('9.0.0'))`` compared with an integer; ``X.startsWith('...')``; ``&&``, ``||``, ``!`` and
parentheses.  Anything else (macros, lists, arithmetic, other functions) makes :func:`evaluate` answer None:
the expression is not judged here (the apiserver compiles it in the dry run, the scheduler evaluates it).
Unqualified attribute names in ``device.attributes['<driver>']`` are the driver's; a missing attribute is an
evaluation error in CEL, which the scheduler treats as "does not match".
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any, Protocol

from kubecore.quantity import parse_quantity

_TOKEN = re.compile(r"""\s*(?:(?P<str>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")|(?P<num>-?\d+)|(?P<id>[A-Za-z_][A-Za-z0-9_]*)"""
                    r"""|(?P<op>==|!=|<=|>=|&&|\|\||[<>!().\[\],]))""")
_REFERENCE = re.compile(r"""device\.(attributes|capacity)\[\s*(['"])([^'"]+)\2\s*\]\.([A-Za-z_][A-Za-z0-9_]*)""")


class DeviceLike(Protocol):
    """What an expression reads of a device (:class:`hollow.dra.Device`)."""

    @property
    def attributes(self) -> dict[str, str]: ...

    @property
    def memory_bytes(self) -> int: ...

    @property
    def multiprocessors(self) -> int: ...


class Unsupported(Exception):
    """The expression is outside the subset."""


class _NoSuchKey(Exception):
    """A CEL evaluation error (a missing attribute): the device does not match."""


def references(expression: str) -> list[tuple[str, str, str]]:
    """(``attributes`` | ``capacity``, domain, name) of every reference in the expression."""
    return [(m.group(1), m.group(3), m.group(4)) for m in _REFERENCE.finditer(expression)]


def _tokens(text: str) -> list[tuple[str, str]]:
    out = []
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _TOKEN.match(text, pos)
        if not m:
            raise Unsupported(text[pos:pos + 10])
        kind = m.lastgroup or ""
        out.append((kind, m.group(kind)))
        pos = m.end()
    return out


_SEMVER = re.compile(r"^(\d+)\.(\d+)\.(\d+)$")


def _version(text: str) -> tuple[int, ...]:
    m = _SEMVER.match(text)
    if not m:
        raise Unsupported(text)
    return tuple(int(x) for x in m.groups())


class _Parser:
    def __init__(self, tokens: list[tuple[str, str]], device: DeviceLike, driver: str) -> None:
        self.t = tokens
        self.i = 0
        self.device = device
        self.driver = driver

    def peek(self) -> str:
        return self.t[self.i][1] if self.i < len(self.t) else ""

    def take(self, want: str | None = None) -> tuple[str, str]:
        if self.i >= len(self.t) or (want is not None and self.t[self.i][1] != want):
            raise Unsupported(want or "end")
        tok = self.t[self.i]
        self.i += 1
        return tok

    # expr := and ('||' and)* ; and := unary ('&&' unary)*
    def expr(self) -> Any:
        left = self.conj()
        while self.peek() == "||":
            self.take()
            right = self.conj()
            left = _truth(left) or _truth(right)
        return left

    def conj(self) -> Any:
        left = self.unary()
        while self.peek() == "&&":
            self.take()
            right = self.unary()
            left = _truth(left) and _truth(right)
        return left

    def unary(self) -> Any:
        if self.peek() == "!":
            self.take()
            return not _truth(self.unary())
        return self.comparison()

    def comparison(self) -> Any:
        left = self.operand()
        op = self.peek()
        if op in ("==", "!=", "<", "<=", ">", ">="):
            self.take()
            right = self.operand()
            return _compare(left, op, right)
        return left

    def operand(self) -> Any:
        kind, text = self.take()
        if text == "(":
            value = self.expr()
            self.take(")")
            return value
        if kind == "str":
            return text[1:-1]
        if kind == "num":
            return int(text)
        if text in ("true", "false"):
            return text == "true"
        if text != "device":
            raise Unsupported(text)
        value = self.path()
        while self.peek() == ".":
            self.take(".")
            _, method = self.take()
            self.take("(")
            arg = self.argument()
            self.take(")")
            value = _method(value, method, arg)
        return value

    def argument(self) -> Any:
        kind, text = self.take()
        if kind == "str":
            return text[1:-1]
        if text in ("quantity", "semver"):
            self.take("(")
            k2, literal = self.take()
            self.take(")")
            if k2 != "str":
                raise Unsupported(literal)
            return parse_quantity(literal[1:-1]) if text == "quantity" else _version(literal[1:-1])
        raise Unsupported(text)

    def path(self) -> Any:
        self.take(".")
        _, field = self.take()
        if field == "driver":
            return self.driver
        if field not in ("attributes", "capacity"):
            raise Unsupported(field)
        self.take("[")
        kind, domain = self.take()
        if kind != "str":
            raise Unsupported(domain)
        self.take("]")
        self.take(".")
        _, name = self.take()
        key = name if domain[1:-1] == self.driver else f"{domain[1:-1]}/{name}"
        if field == "attributes":
            if key not in self.device.attributes:
                raise _NoSuchKey(key)
            value = self.device.attributes[key]
            return _version(value) if _SEMVER.match(value) and name.endswith(("Version", "Capability")) else value
        if key == "memory":
            return Fraction(self.device.memory_bytes)
        if key == "multiprocessors" and self.device.multiprocessors:
            return Fraction(self.device.multiprocessors)
        raise _NoSuchKey(key)


def _truth(v: Any) -> bool:
    if not isinstance(v, bool):
        raise Unsupported(repr(v))
    return v


def _compare(a: Any, op: str, b: Any) -> bool:
    if type(a) is not type(b) and not (isinstance(a, int) and isinstance(b, int)):
        raise Unsupported(f"{a!r} {op} {b!r}")
    if op == "==":
        return bool(a == b)
    if op == "!=":
        return bool(a != b)
    if isinstance(a, bool | str) and not isinstance(a, int):
        raise Unsupported(op)
    return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]


def _method(value: Any, method: str, arg: Any) -> Any:
    if method == "compareTo" and type(value) is type(arg) and isinstance(value, Fraction | tuple):
        return (value > arg) - (value < arg)
    if method == "startsWith" and isinstance(value, str) and isinstance(arg, str):
        return value.startswith(arg)
    raise Unsupported(method)


def evaluate(expression: str, device: DeviceLike, driver: str) -> bool | None:
    """Whether ``expression`` selects ``device`` (a missing attribute: False); None when the expression is
    outside the subset this module reads."""
    try:
        parser = _Parser(_tokens(expression), device, driver)
        value = parser.expr()
        if parser.i != len(parser.t):
            raise Unsupported("trailing")
        return _truth(value)
    except _NoSuchKey:
        return False
    except (Unsupported, ValueError, ZeroDivisionError):
        return None
