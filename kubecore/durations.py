"""Go durations (``90s``, ``1m30s``, ``250ms``, ``500us``): one grammar for the whole project.

Kubernetes users write Go durations everywhere (flags, annotations, KWOK stages), so the pod
annotations the hollow agent reads, the scenario and pools files and the load generator all accept
exactly what Go's ``time.ParseDuration`` accepts, less negative values (no lifecycle step can happen
before its cause).  Files may also give a plain number of seconds; annotations are always strings.
``forever`` is accepted only where a caller says a duration may be endless (a run that never ends).
"""

from __future__ import annotations

import math
import re

#: seconds per unit, as Go spells them (both micro signs included)
UNITS: dict[str, float] = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,  # U+00B5 MICRO SIGN
    "μs": 1e-6,  # U+03BC GREEK SMALL LETTER MU
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_PART = re.compile(r"([0-9]+\.?[0-9]*|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h)")

_UNIT_NS = {unit: round(seconds * 1e9) for unit, seconds in UNITS.items()}


def _nanos(number: str, unit_ns: int) -> int:
    """``number`` (digits with an optional fraction) times ``unit_ns``, in whole nanoseconds, exactly
    as Go adds them up (so ``5012ms`` is 5.012 s, not 5.0120000000000005)."""
    whole, _, frac = number.partition(".")
    value = int(whole or "0") * unit_ns
    if frac:
        value += int(frac) * unit_ns // 10 ** len(frac)
    return value


#: the value of ``forever``: a duration that never ends
FOREVER = math.inf

#: longest duration Go can represent (int64 nanoseconds), about 292 years
MAX_SECONDS = (2**63 - 1) / 1e9

EXPECTED = "a Go duration such as '30s', '1m30s' or '250ms'"


def parse_go_duration(text: str, *, allow_forever: bool = True) -> float:
    """Seconds from a Go ``time.Duration`` string (``1h2m3.5s``, ``250ms``, ``0``).

    Args:
        text: the duration; surrounding white space is ignored, a leading ``+`` allowed.
        allow_forever: accept ``forever`` (any case) and return :data:`FOREVER`.

    Raises:
        ValueError: naming the text and the expected form (negative values included).
    """
    if not isinstance(text, str):
        raise ValueError(f"expected {EXPECTED}, got {text!r}")
    raw = text.strip()
    if raw.lower() == "forever":
        if allow_forever:
            return FOREVER
        raise ValueError(f"expected a finite duration, got {text!r}")
    body = raw[1:] if raw.startswith("+") else raw
    if body == "0":
        return 0.0
    if raw.startswith("-"):
        raise ValueError(f"expected a non-negative duration, got {text!r}")
    pos, nanos = 0, 0
    for match in _PART.finditer(body):
        if match.start() != pos:
            break
        nanos += _nanos(match.group(1), _UNIT_NS[match.group(2)])
        pos = match.end()
    total = nanos / 1e9
    if pos == 0 or pos != len(body):
        hint = " or 'forever'" if allow_forever else ""
        raise ValueError(f"expected {EXPECTED}{hint}, got {text!r}")
    if total > MAX_SECONDS:
        raise ValueError(f"expected a duration of at most ~292 years (Go's limit), got {text!r}")
    return total


def to_seconds(value: object, *, allow_forever: bool = False) -> float:
    """Seconds from what a file may hold: a number of seconds or a Go duration string.

    Booleans, negative, NaN and infinite numbers are refused (``forever`` only when allowed).

    Raises:
        ValueError: naming the value and the expected form.
    """
    if isinstance(value, bool):
        raise ValueError(f"expected {EXPECTED} or a number of seconds, got {value!r}")
    if isinstance(value, int | float):
        seconds = float(value)
        if not math.isfinite(seconds):
            raise ValueError(f"expected a finite number of seconds, got {value!r}")
        if seconds < 0:
            raise ValueError(f"expected a non-negative duration, got {value!r}")
        if seconds > MAX_SECONDS:
            raise ValueError(f"expected a duration of at most ~292 years (Go's limit), got {value!r}")
        return seconds
    if isinstance(value, str):
        try:
            return parse_go_duration(value, allow_forever=allow_forever)
        except ValueError as exc:
            if not str(exc).startswith(f"expected {EXPECTED}"):
                raise  # negative, endless or too long: that message says it better
            hint = ", 'forever'" if allow_forever else ""
            raise ValueError(f"expected {EXPECTED}{hint} or a number of seconds, got {value!r}") from None
    raise ValueError(f"expected {EXPECTED} or a number of seconds, got {type(value).__name__}")


def format_go_duration(seconds: float) -> str:
    """Go's ``Duration.String()`` for ``seconds`` (``1m30s``, ``250ms``, ``1.5µs``); ``forever`` for inf.

    The result parses back to the same number of nanoseconds with :func:`parse_go_duration`.
    """
    if math.isinf(seconds) and seconds > 0:
        return "forever"
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"expected a non-negative duration in seconds, got {seconds!r}")
    ns = round(seconds * 1e9)
    if ns == 0:
        return "0s"
    if ns < 1_000:
        return f"{ns}ns"
    if ns < 1_000_000:
        return f"{_decimal(ns, 1_000)}µs"
    if ns < 1_000_000_000:
        return f"{_decimal(ns, 1_000_000)}ms"
    hours, rest = divmod(ns, 3_600 * 10**9)
    minutes, rest = divmod(rest, 60 * 10**9)
    out = f"{hours}h" if hours else ""
    if hours or minutes:
        out += f"{minutes}m"
    return out + f"{_decimal(rest, 10**9)}s"


def _decimal(value: int, unit: int) -> str:
    whole, frac = divmod(value, unit)
    if not frac:
        return str(whole)
    digits = len(str(unit)) - 1
    return f"{whole}.{frac:0{digits}d}".rstrip("0")
