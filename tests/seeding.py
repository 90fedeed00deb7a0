"""Every test starts from a known random state, and the order of the tests can be shuffled by the same seed.

A test that draws from Python's global ``random`` (directly, or through code that does) without seeding it
passes or fails with the draw: a flake. So the session has one seed (:data:`SEED_VAR`, else a fresh one),
printed in pytest's header, and before each test the global generators are seeded from it and the test's
id. A failure is then reproduced by running again with the seed the header printed:
``HOLLOWSCALE_TEST_SEED=<seed> make unit PYTEST_ARGS=<the test>``.

With :data:`SHUFFLE_VAR` set, the modules run in an order drawn from the seed, and so do the tests inside
each module (a module stays contiguous, so its fixtures are made once). ``make test-flakes``
(``tests/flakes.py``) runs the unit tier many times, each with its own seed and order.

Hypothesis' property tests draw their examples from a generator of their own. They are derandomized (the
same examples every run, drawn from the test's own code) unless the session shuffles: then they explore
examples drawn from the session's seed, so ``make test-flakes`` also looks at inputs a fixed run never
tries. Hypothesis' example database stays off, so that no run replays another's failures (or writes
``.hypothesis/`` into the checkout).

Tests that need randomness should still draw from a generator they seed themselves (``random.Random(seed)``)
or assert bounds derived from the code's definitions: this module only makes a remaining dependence on
the global state visible and reproducible, it is not a licence for one.
"""

from __future__ import annotations

import os
import random
import sys
from collections.abc import Sequence
from typing import Protocol, TypeVar

#: the session's seed (an integer); when unset, a fresh one is drawn and printed in pytest's header
SEED_VAR = "HOLLOWSCALE_TEST_SEED"
#: when "1": modules, and the tests inside each module, run in an order drawn from the seed
SHUFFLE_VAR = "HOLLOWSCALE_TEST_SHUFFLE"


def session_seed() -> int:
    """The seed of this session, the same in every pytest-xdist worker: set in the environment once (the
    controller's environment is inherited by its workers), so the workers also collect the same order."""
    given = os.environ.get(SEED_VAR)
    if given is None:
        given = str(random.SystemRandom().randrange(10**9))
        os.environ[SEED_VAR] = given
    try:
        return int(given)
    except ValueError:
        raise SystemExit(f"{SEED_VAR}={given!r}: expected an integer seed") from None


def shuffling() -> bool:
    """Whether this session shuffles the order of its tests (:data:`SHUFFLE_VAR`)."""
    return os.environ.get(SHUFFLE_VAR, "") == "1"


def header() -> str:
    """The line pytest prints in its header: the seed, and how to use it again."""
    order = "shuffled by it" if shuffling() else "in file order"
    return (f"random seed {session_seed()} (each test's global random state is seeded from it; tests run "
            f"{order}); reproduce with {SEED_VAR}={session_seed()}")


def configure_hypothesis() -> None:
    """Hypothesis' examples: derandomized, or drawn from the session's seed when the session shuffles."""
    from hypothesis import core, settings

    exploring = shuffling()
    settings.register_profile("hollowscale", derandomize=not exploring, database=None)
    settings.load_profile("hollowscale")
    if exploring:
        core.global_force_seed = session_seed()  # type: ignore[assignment]  # what pytest's --hypothesis-seed sets


def seed_globals(nodeid: str) -> None:
    """Seed Python's global ``random`` (and numpy's legacy global generator, when numpy is loaded) for the
    test ``nodeid``: the same seed and id give the same draws in any process and any order."""
    key = f"{session_seed()}/{nodeid}"
    random.seed(key)  # a str seed is hashed with SHA-512: stable across processes and PYTHONHASHSEED
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed(random.Random(key).randrange(2**32))


class _Item(Protocol):
    nodeid: str


ItemT = TypeVar("ItemT", bound=_Item)


def shuffled(items: Sequence[ItemT], seed: int) -> list[ItemT]:
    """``items`` in an order drawn from ``seed``: the modules (the part of the id before ``::``) in a
    random order, each module's tests contiguous and in a random order of their own."""
    rng = random.Random(seed)
    modules: dict[str, list[ItemT]] = {}
    for item in items:
        modules.setdefault(item.nodeid.split("::", 1)[0], []).append(item)
    names = sorted(modules)
    rng.shuffle(names)
    order: list[ItemT] = []
    for name in names:
        tests = list(modules[name])
        rng.shuffle(tests)
        order.extend(tests)
    return order
