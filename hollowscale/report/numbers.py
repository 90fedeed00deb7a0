"""How a figure is written in every report: one function for the tables, the Markdown and the HTML.

``number`` writes a missing figure (None) as ``n/a``, a float with thousands separators and a fixed
count of decimals (trailing zeros cut where the table wants the shortest form), a whole number with
separators or as it is, anything else as ``str`` gives it. ``percent`` writes a relative change.
"""

from __future__ import annotations

from typing import Any

#: what a figure that was not measured reads as
MISSING = "n/a"


def number(v: Any, nd: int = 1, *, trim: bool = False, group_ints: bool = True) -> str:
    """``v`` for a report.

    Args:
        v: the figure: None, a float, an int (a bool counts as one), or anything else.
        nd: decimals of a float.
        trim: cut a float's trailing zeros and then a trailing point (``1,234.500`` -> ``1,234.5``).
        group_ints: write an int with thousands separators (``1,234``); False: as ``str`` does.
    """
    if v is None:
        return MISSING
    if isinstance(v, float):
        text = f"{v:,.{nd}f}"
        return text.rstrip("0").rstrip(".") if trim else text
    if isinstance(v, int) and group_ints:
        return f"{v:,}"
    return str(v)


def percent(p: float | None) -> str:
    """A relative change in percent, signed, one decimal (``+4.2%``); ``+inf`` from zero; ``n/a``."""
    return MISSING if p is None else ("+inf" if p == float("inf") else f"{p:+.1f}%")
