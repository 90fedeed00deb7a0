"""Go-style durations and the duration distributions that pool lifecycles are made of.

Pod annotations carry Go durations (``90s``, ``1m30s``, ``250ms``) because that is what Kubernetes
users write everywhere else; pools may ask for a distribution instead of a fixed value so that a
thousand pods do not all finish in the same second.  Samples are drawn from a generator seeded by a
key (the pod uid), so an agent that restarts draws the *same* value again and never moves a
transition that it has already promised.
"""

from __future__ import annotations

import hashlib
import math
import random
import re
from dataclasses import dataclass
from typing import Literal

_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_PART = re.compile(r"([0-9]*\.?[0-9]+)(ns|us|µs|μs|ms|s|m|h)")

#: Sentinel run duration meaning "never finishes on its own".
FOREVER = math.inf


def parse_go_duration(text: str) -> float:
    """Parse a Go ``time.Duration`` string (``1h2m3.5s``, ``250ms``, ``0``) into seconds.

    ``forever`` (case-insensitive) returns :data:`FOREVER`.  Negative durations are rejected
    because no lifecycle stage can happen before its cause.

    Raises:
        ValueError: naming the text and the expected form.
    """
    raw = text.strip()
    if raw.lower() == "forever":
        return FOREVER
    if raw == "0":
        return 0.0
    if not raw or raw.startswith("-"):
        raise ValueError(f"expected a non-negative Go duration such as '30s', '1m30s' or 'forever', got {text!r}")
    body = raw.lstrip("+")
    pos = 0
    total = 0.0
    for match in _PART.finditer(body):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNITS[match.group(2)]
        pos = match.end()
    if pos != len(body) or pos == 0:
        raise ValueError(f"expected a non-negative Go duration such as '30s', '1m30s' or 'forever', got {text!r}")
    return total


def format_go_duration(seconds: float) -> str:
    """Inverse of :func:`parse_go_duration` for messages and annotations (``forever`` for inf)."""
    if math.isinf(seconds):
        return "forever"
    if seconds == int(seconds):
        return f"{int(seconds)}s"
    return f"{seconds:g}s"


def keyed_rng(*parts: str) -> random.Random:
    """A generator seeded by a stable hash of ``parts`` (Python's ``hash`` is salted per process)."""
    digest = hashlib.blake2b("\x00".join(parts).encode(), digest_size=8).digest()
    return random.Random(int.from_bytes(digest, "big"))


def keyed_uniform(*parts: str) -> float:
    """A stable number in [0, 1) for ``parts``; used for fractions (which pods fail, which nodes)."""
    return keyed_rng(*parts).random()


DistKind = Literal["fixed", "uniform", "normal", "exponential", "lognormal"]


@dataclass(frozen=True)
class DurationDist:
    """A distribution of durations.

    Attributes:
        kind: ``fixed`` (``value``), ``uniform`` (``value`` +- ``jitter``), ``normal`` (mean ``value``,
            stddev ``jitter``), ``exponential`` (mean ``value``), ``lognormal`` (median ``value``,
            ``jitter`` is sigma of the underlying normal, unitless).
        value: seconds; ``inf`` only for ``fixed`` (``forever``).
        jitter: seconds (uniform half-width, normal stddev) or unitless sigma (lognormal).
        minimum: seconds; samples are clamped to at least this (>= 0).
        maximum: seconds; samples are clamped to at most this (``inf`` = no cap).
    """

    kind: DistKind = "fixed"
    value: float = 0.0
    jitter: float = 0.0
    minimum: float = 0.0
    maximum: float = math.inf

    @property
    def forever(self) -> bool:
        """True when the duration never ends (``forever``)."""
        return self.kind == "fixed" and math.isinf(self.value)

    def sample(self, rng: random.Random) -> float:
        """Draw one duration in seconds, clamped to [minimum, maximum]."""
        if self.kind == "fixed":
            x = self.value
        elif self.kind == "uniform":
            x = self.value + rng.uniform(-self.jitter, self.jitter)
        elif self.kind == "normal":
            x = rng.gauss(self.value, self.jitter)
        elif self.kind == "exponential":
            x = rng.expovariate(1.0 / self.value) if self.value > 0 else 0.0
        else:
            x = self.value * math.exp(rng.gauss(0.0, self.jitter))
        return min(max(x, self.minimum, 0.0), self.maximum)

    def sample_for(self, *key: str) -> float:
        """Draw the duration that belongs to ``key`` (stable across processes and restarts)."""
        if self.kind == "fixed":
            return self.value
        return self.sample(keyed_rng(*key))


FIXED_ZERO = DurationDist()
