"""How a value appears in an error message: ``str 'ten'``, ``boolean true``, ``a mapping``, ``null``.

Every message that says "got ..." words the value the same way, in every spec of every package.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def show(v: Any) -> str:
    """A value as an error message shows it (long ones cut at 80 characters)."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return f"boolean {str(v).lower()}"
    if isinstance(v, Mapping):
        return "a mapping"
    if isinstance(v, list | tuple):
        return "a list"
    text = repr(v)
    return f"{type(v).__name__} {text if len(text) <= 80 else text[:77] + '...'}"
