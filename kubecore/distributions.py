"""Duration distributions: one type and one YAML shape for every duration that may vary.

A thousand pods that all finish in the same second load a scheduler differently from a thousand that
finish over a minute, so run durations and startup delays may be distributions.  The same type
serves the pools file (pod lifecycle defaults of the hollow agent), the workload templates of the load
generator and the scenario that composes them, written the same way everywhere::

    run_duration: 30s                                  # fixed (a Go duration or a number of seconds)
    run_duration: forever                              # never ends (where allowed)
    run_duration: {dist: uniform, min: 30s, max: 90s}
    run_duration: {dist: normal, mean: 60s, stddev: 10s, min: 5s}      # min/max clamp the draw
    run_duration: {dist: exponential, mean: 20s, max: 90s}
    run_duration: {dist: lognormal, median: 30s, sigma: 0.5}           # sigma of the underlying normal

Draws keyed by a string (:meth:`DurationDist.sample_for`) are the same in every process, so a hollow
agent that restarts draws the same value again and never moves a transition it has promised.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from kubecore.durations import FOREVER, format_go_duration, parse_go_duration, to_seconds
from kubecore.wording import show

DistKind = Literal["fixed", "uniform", "normal", "exponential", "lognormal"]
#: what ``dist:`` may say (``forever`` is the fixed endless duration)
DIST_NAMES: tuple[str, ...] = ("fixed", "uniform", "normal", "exponential", "lognormal", "forever")
#: the keys each ``dist`` takes (besides ``dist`` itself); first the required ones, then the optional ones
DIST_KEYS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "fixed": (("value",), ()),
    "forever": ((), ()),
    "uniform": (("min", "max"), ()),
    "normal": (("mean", "stddev"), ("min", "max")),
    "exponential": (("mean",), ("min", "max")),
    "lognormal": (("median", "sigma"), ("min", "max")),
}


def keyed_rng(*parts: str) -> random.Random:
    """A generator seeded by a stable hash of ``parts`` (Python's ``hash`` is salted per process)."""
    digest = hashlib.blake2b("\x00".join(parts).encode(), digest_size=8).digest()
    return random.Random(int.from_bytes(digest, "big"))


def keyed_uniform(*parts: str) -> float:
    """A stable number in [0, 1) for ``parts``; used for fractions (which pods fail, which nodes)."""
    return keyed_rng(*parts).random()


@dataclass(frozen=True)
class DurationDist:
    """A distribution of durations in seconds.

    Attributes:
        kind: ``fixed`` (``value``; ``inf`` = forever), ``uniform`` (between ``minimum`` and ``maximum``),
            ``normal`` (mean ``value``, standard deviation ``spread``), ``exponential`` (mean ``value``),
            ``lognormal`` (median ``value``, ``spread`` = sigma of the underlying normal, unitless).
        value: seconds (see ``kind``).
        spread: seconds for ``normal``, unitless for ``lognormal``, unused otherwise.
        minimum: seconds; the bound of ``uniform``, else draws are clamped to at least this.
        maximum: seconds; the bound of ``uniform``, else draws are clamped to at most this (inf = none).
    """

    kind: DistKind = "fixed"
    value: float = 0.0
    spread: float = 0.0
    minimum: float = 0.0
    maximum: float = math.inf

    @classmethod
    def fixed(cls, seconds: float) -> DurationDist:
        """A fixed duration (``inf`` = forever)."""
        return cls("fixed", seconds)

    @property
    def forever(self) -> bool:
        """True when the duration never ends."""
        return self.kind == "fixed" and math.isinf(self.value)

    def mean(self) -> float | None:
        """Expected value in seconds before clamping (None for ``forever``)."""
        if self.forever:
            return None
        if self.kind == "uniform":
            return (self.minimum + self.maximum) / 2
        if self.kind == "lognormal":
            return self.value * math.exp(self.spread**2 / 2)
        return self.value

    def upper_bound(self) -> float:
        """The largest duration a draw can be, in seconds: a fixed value itself, else ``maximum`` (the
        bound of ``uniform``, the clamp of the others; inf when a distribution has none, and for ``forever``)."""
        return self.value if self.kind == "fixed" else self.maximum

    def sample(self, rng: random.Random) -> float:
        """One draw in seconds, clamped to [minimum, maximum] and never negative."""
        if self.kind == "fixed":
            x = self.value
        elif self.kind == "uniform":
            x = rng.uniform(self.minimum, self.maximum)
        elif self.kind == "normal":
            x = rng.gauss(self.value, self.spread)
        elif self.kind == "exponential":
            x = rng.expovariate(1.0 / self.value) if self.value > 0 else 0.0
        else:
            x = self.value * math.exp(rng.gauss(0.0, self.spread))
        return min(max(x, self.minimum, 0.0), self.maximum)

    def sample_for(self, *key: str) -> float:
        """The draw that belongs to ``key`` (stable across processes and restarts)."""
        if self.kind == "fixed":
            return self.value
        return self.sample(keyed_rng(*key))

    def to_doc(self) -> str | float | dict[str, str | float]:
        """The file form :func:`parse_dist` reads back to an equal distribution (exact, also through JSON)."""
        if self.kind == "fixed":
            return seconds_doc(self.value)
        doc: dict[str, str | float] = {"dist": self.kind}
        if self.kind == "uniform":
            doc.update(min=seconds_doc(self.minimum), max=seconds_doc(self.maximum))
            return doc
        if self.kind == "lognormal":
            doc.update(median=seconds_doc(self.value), sigma=self.spread)
        elif self.kind == "normal":
            doc.update(mean=seconds_doc(self.value), stddev=seconds_doc(self.spread))
        else:
            doc.update(mean=seconds_doc(self.value))
        if self.minimum > 0:
            doc["min"] = seconds_doc(self.minimum)
        if not math.isinf(self.maximum):
            doc["max"] = seconds_doc(self.maximum)
        return doc


def seconds_doc(seconds: float) -> str | float:
    """A Go duration when it reads back to the very same float (``forever`` for inf), else the number."""
    text = format_go_duration(seconds)
    return text if parse_go_duration(text) == seconds else seconds


FIXED_ZERO = DurationDist()
FOREVER_DIST = DurationDist("fixed", FOREVER)


class DistError(ValueError):
    """A distribution that cannot be used; ``key`` names the offending key ('' for the whole value)."""

    def __init__(self, key: str, message: str):
        super().__init__(message)
        self.key = key
        self.message = message


def parse_dist(value: Any, *, allow_forever: bool = True) -> DurationDist:
    """A :class:`DurationDist` from its file form (see the module docstring).

    Raises:
        DistError: naming the key at fault and what was expected (the first problem only; a
            distribution is small enough that one problem at a time reads well).
    """
    if isinstance(value, bool) or value is None or isinstance(value, list):
        raise DistError("", "expected a duration ('30s', 12.5)" + (", 'forever'" if allow_forever else "")
                        + f" or a mapping {{dist: {'|'.join(DIST_NAMES)}, ...}}, got {show(value)}")
    if not isinstance(value, Mapping):
        try:
            seconds = to_seconds(value, allow_forever=allow_forever)
        except ValueError as exc:
            raise DistError("", str(exc)) from None
        return DurationDist.fixed(seconds)
    kind = value.get("dist", "fixed")
    if kind not in DIST_NAMES:
        raise DistError("dist", f"expected one of {', '.join(DIST_NAMES)}, got {kind!r}")
    if kind == "forever" and not allow_forever:
        raise DistError("dist", "expected a finite distribution, got 'forever'")
    required, optional = DIST_KEYS[kind]
    for key in value:
        if key != "dist" and key not in required and key not in optional:
            allowed = ", ".join(("dist", *required, *optional))
            raise DistError(str(key), f"unknown key for dist {kind!r} (it takes: {allowed})")
    for key in required:
        if key not in value:
            raise DistError(key, f"is required for dist {kind!r}")

    def secs(key: str, default: float) -> float:
        if key not in value:
            return default
        try:
            return to_seconds(value[key])
        except ValueError as exc:
            raise DistError(key, str(exc)) from None

    if kind == "forever":
        return FOREVER_DIST
    if kind == "fixed":
        return DurationDist.fixed(secs("value", 0.0))
    lo, hi = secs("min", 0.0), secs("max", math.inf)
    if hi < lo:
        raise DistError("max", f"expected max >= min ({lo:g}s), got {hi:g}s")
    if kind == "uniform":
        return DurationDist("uniform", minimum=lo, maximum=hi)
    if kind == "lognormal":
        sigma = value["sigma"]
        if isinstance(sigma, bool) or not isinstance(sigma, int | float) or not math.isfinite(sigma) or sigma < 0:
            raise DistError("sigma", f"expected a number >= 0 (unitless), got {show(sigma)}")
        return DurationDist("lognormal", secs("median", 0.0), float(sigma), lo, hi)
    if kind == "normal":
        return DurationDist("normal", secs("mean", 0.0), secs("stddev", 0.0), lo, hi)
    return DurationDist("exponential", secs("mean", 0.0), 0.0, lo, hi)

