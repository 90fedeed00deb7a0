"""The suite's random state and order (tests/seeding.py) and ``make test-flakes``' reading of its rounds
(tests/flakes.py): a failure found with a seed is reproduced by that seed."""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

import flakes
import pytest
import seeding


@dataclass(frozen=True)
class Item:
    nodeid: str


ITEMS = [Item(f"tests/unit/test_{m}.py::test_{i}") for m in "abcdef" for i in range(5)]


def test_the_same_seed_and_test_give_the_same_draws(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(seeding.SEED_VAR, "42")
    seeding.seed_globals("tests/unit/test_a.py::test_x")
    first = [random.random() for _ in range(3)]
    seeding.seed_globals("tests/unit/test_b.py::test_y")
    other = random.random()
    seeding.seed_globals("tests/unit/test_a.py::test_x")
    assert [random.random() for _ in range(3)] == first
    assert other != first[0]
    monkeypatch.setenv(seeding.SEED_VAR, "43")
    seeding.seed_globals("tests/unit/test_a.py::test_x")
    assert random.random() != first[0]


def test_a_seed_that_is_not_an_integer_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(seeding.SEED_VAR, "soon")
    with pytest.raises(SystemExit, match="HOLLOWSCALE_TEST_SEED='soon': expected an integer"):
        seeding.session_seed()


def test_shuffled_order_keeps_each_module_together_and_follows_the_seed() -> None:
    order = seeding.shuffled(ITEMS, 7)
    assert sorted(i.nodeid for i in order) == sorted(i.nodeid for i in ITEMS)
    modules = [i.nodeid.split("::")[0] for i in order]
    runs = [m for k, m in enumerate(modules) if k == 0 or modules[k - 1] != m]
    assert len(runs) == len(set(modules)) == 6  # each module contiguous
    assert seeding.shuffled(ITEMS, 7) == order
    assert seeding.shuffled(ITEMS, 8) != order
    assert order != ITEMS


JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" errors="1" failures="1" tests="4">
<testcase classname="tests.unit.test_seeding" name="test_ok" time="0.1"/>
<testcase classname="tests.unit.test_seeding" name="test_bad[x]" time="0.1">
  <failure message="assert 0.87 &lt; 0.5">long text</failure></testcase>
<testcase classname="tests.unit.test_seeding.TestGroup" name="test_in_class" time="0.1">
  <error message="fixture failed&#10;second line">trace</error></testcase>
<testcase classname="tests.unit.test_seeding" name="test_skipped" time="0.0"><skipped message="x"/></testcase>
</testsuite></testsuites>
"""


def test_rounds_are_read_from_junit_with_pytest_ids(tmp_path: Path) -> None:
    path = tmp_path / "round.xml"
    path.write_text(JUNIT)
    tests, failed = flakes.read_junit(path)
    assert tests == 4
    assert failed == {
        "tests/unit/test_seeding.py::test_bad[x]": "failure: assert 0.87 < 0.5",
        "tests/unit/test_seeding.py::TestGroup::test_in_class": "error: fixture failed",
    }


def test_a_test_that_failed_in_any_round_is_named_with_its_seeds() -> None:
    rounds = [flakes.Round(1, 0, 10.0, 4, {}),
              flakes.Round(2, 1, 10.0, 4, {"t.py::a": "failure: x"}),
              flakes.Round(3, 1, 10.0, 4, {"t.py::a": "failure: y", "t.py::b": "error: z"})]
    flaky = flakes.summarise(rounds)
    assert {k: v.seeds for k, v in flaky.items()} == {"t.py::a": [2, 3], "t.py::b": [3]}
    assert flaky["t.py::a"].first_message == "failure: x"
    text = flakes.render(rounds, flaky)
    assert "2/3  t.py::a  (seeds 2, 3)" in text and "HOLLOWSCALE_TEST_SEED=2" in text
    assert flakes.render(rounds[:1], {}).endswith("no test failed in any round")
