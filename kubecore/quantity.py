"""Kubernetes resource quantities (``500m``, ``64Gi``, ``1.5``) as exact numbers.

Used by the hollow agent (node capacity), the load generator (requests) and reports (GPU totals).
Values are :class:`fractions.Fraction` so ``100m + 900m == 1`` holds exactly.
"""

from __future__ import annotations

import re
from fractions import Fraction

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 1000),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_RE = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$")


def parse_quantity(value: str | int | float) -> Fraction:
    """Parse a quantity string; raise ``ValueError`` naming what was expected."""
    if isinstance(value, bool):
        raise ValueError(f"expected a Kubernetes quantity, got {value!r}")
    if isinstance(value, int | float):
        return Fraction(str(value))
    text = str(value).strip()
    match = _RE.match(text)
    if not match:
        raise ValueError(f"expected a Kubernetes quantity such as '500m', '64Gi' or '8', got {value!r}")
    number, suffix = match.group(1), match.group(2) or ""
    try:
        base = Fraction(number)
    except ValueError:
        raise ValueError(f"expected a Kubernetes quantity, got {value!r}") from None
    if "e" in number.lower() and suffix:
        raise ValueError(f"expected a Kubernetes quantity, got {value!r}")
    scale = _BINARY.get(suffix) or _DECIMAL[suffix]
    return base * scale


def format_quantity(value: Fraction | int, binary: bool = False) -> str:
    """Canonical-ish string for a quantity: integers plain, fractions in milli, bytes in Ki/Mi/Gi."""
    value = Fraction(value)
    if value.denominator != 1:
        milli = value * 1000
        if milli.denominator != 1:
            raise ValueError(f"{value} is finer than milli-units")
        return f"{milli.numerator}m"
    n = value.numerator
    if binary and n:
        for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
            if n % _BINARY[suffix] == 0:
                return f"{n // _BINARY[suffix]}{suffix}"
    return str(n)
