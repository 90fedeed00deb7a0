"""``make test-flakes``: run the unit tier N times, each with its own random seed and test order, and name
every test that failed at least once.

A flaky test is a submission that does not land, at random; one run of the suite rarely shows it. Each
round here runs ``pytest -m "not integration"`` with ``HOLLOWSCALE_TEST_SEED=<base+i>`` (the global random
state of every test is seeded from it) and ``HOLLOWSCALE_TEST_SHUFFLE=1`` (modules, and tests inside them,
in an order drawn from it): see ``tests/seeding.py``. Each round's JUnit XML is kept in the output folder,
and the summary (``flakes.json``, and the table printed at the end) gives for each test that failed its
failures out of the rounds, the seeds it failed with, and the first line of its first failure, so that
``HOLLOWSCALE_TEST_SEED=<seed> HOLLOWSCALE_TEST_SHUFFLE=1 make unit`` reproduces it.

Exit status: 0 when every round passed, 1 when a test failed in any round, 2 on bad arguments. It is not
part of ``.ci/run``: with the default 20 rounds it takes about 20 times the unit tier.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
import seeding  # noqa: E402  (tests/ is not a package; seeding.py names the variables)

#: the unit tier, as ``make unit`` and ``scripts/test.sh`` select it
UNIT_MARKERS = "not integration"


@dataclass
class Failures:
    """What one test did over the rounds."""

    seeds: list[int] = field(default_factory=list)
    first_message: str = ""


@dataclass(frozen=True)
class Round:
    """One pytest run of the unit tier."""

    seed: int
    exit_code: int
    seconds: float
    tests: int
    failed: dict[str, str]  # test id -> first line of its failure


def read_junit(path: Path) -> tuple[int, dict[str, str]]:
    """(tests run, {test id: first line of its failure or error}) from pytest's JUnit XML at ``path``."""
    root = ET.parse(path).getroot()
    count = 0
    failed: dict[str, str] = {}
    for case in root.iter("testcase"):
        count += 1
        for tag in ("failure", "error"):
            bad = case.find(tag)
            if bad is None:
                continue
            test_id = _test_id(case.get("file") or "", case.get("classname", ""), case.get("name", ""))
            message = (bad.get("message") or bad.text or tag).strip().splitlines()
            failed.setdefault(test_id, f"{tag}: {message[0][:200] if message else ''}")
    return count, failed


def _test_id(file: str, classname: str, name: str) -> str:
    """pytest's node id from a JUnit test case: ``classname`` is the dotted module path, then the class."""
    parts = classname.split(".")
    # the module is the longest prefix of the dotted path that is a file under the repo
    for cut in range(len(parts), 0, -1):
        candidate = "/".join(parts[:cut]) + ".py"
        if (REPO / candidate).is_file():
            return "::".join([candidate, *parts[cut:], name])
    return f"{file or classname}::{name}"


def run_round(seed: int, out: Path, pytest_args: Sequence[str]) -> Round:
    """Run the unit tier once with ``seed``, shuffled; its JUnit XML and output go to ``out``."""
    junit = out / f"round-{seed}.xml"
    log = out / f"round-{seed}.log"
    env = {**os.environ, seeding.SEED_VAR: str(seed), seeding.SHUFFLE_VAR: "1"}
    started = time.monotonic()
    with log.open("wb") as sink:
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", UNIT_MARKERS,
             f"--junitxml={junit}", *pytest_args],
            cwd=REPO, env=env, stdout=sink, stderr=subprocess.STDOUT, check=False)
    seconds = time.monotonic() - started
    tests, failed = read_junit(junit) if junit.exists() else (0, {})
    if proc.returncode != 0 and not failed:  # the session itself failed: collection, or a guard at its end
        failed = {"(the pytest session)": f"exit {proc.returncode}: {_session_failure(log)}"}
    return Round(seed, proc.returncode, seconds, tests, failed)


def _session_failure(log: Path) -> str:
    """What a session that failed outside any test said: the first line of a guard's or collection's
    complaint in its output (tests/sessionguard.py, tests/tmpguard.py), else where to look."""
    for line in log.read_text(errors="replace").splitlines():
        if "still there at its end" in line or "still running" in line or line.startswith(("ERROR", "E   ")):
            return line.strip()[:200]
    return f"see {log.name}"


def summarise(rounds: Sequence[Round]) -> dict[str, Failures]:
    """Each test that failed in at least one round, with the seeds it failed with."""
    flaky: dict[str, Failures] = {}
    for r in rounds:
        for test_id, message in r.failed.items():
            entry = flaky.setdefault(test_id, Failures(first_message=message))
            entry.seeds.append(r.seed)
    return dict(sorted(flaky.items()))


def render(rounds: Sequence[Round], flaky: dict[str, Failures]) -> str:
    """The table printed at the end."""
    lines = [f"{len(rounds)} rounds of the unit tier, {sum(r.tests for r in rounds)} test runs, "
             f"{sum(r.seconds for r in rounds) / 60:.1f} min"]
    if not flaky:
        lines.append("no test failed in any round")
        return "\n".join(lines)
    lines.append(f"{len(flaky)} tests failed at least once:")
    for test_id, entry in flaky.items():
        seeds = ", ".join(str(s) for s in entry.seeds[:8]) + (" ..." if len(entry.seeds) > 8 else "")
        lines.append(f"  {len(entry.seeds)}/{len(rounds)}  {test_id}  (seeds {seeds})")
        lines.append(f"        {entry.first_message}")
    first = next(iter(flaky.values())).seeds[0]
    lines.append(f"reproduce one: {seeding.SEED_VAR}={first} {seeding.SHUFFLE_VAR}=1 make unit")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="make test-flakes",
        description="Run the unit tier N times, each round with its own random seed and shuffled test order "
                    "(tests/seeding.py), and name every test that failed at least once.")
    parser.add_argument("--rounds", "-n", type=int, default=20, help="how many rounds (default 20)")
    parser.add_argument("--base-seed", type=int, default=1,
                        help="round i runs with seed BASE+i (default 1): the same base gives the same rounds")
    parser.add_argument("--out", type=Path, default=REPO / "reports" / "flakes",
                        help="folder for each round's JUnit XML and log and flakes.json (default reports/flakes)")
    parser.add_argument("pytest_args", nargs="*", help="more pytest arguments (after --), e.g. a test file")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error(f"--rounds {args.rounds}: expected at least 1")
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    rounds: list[Round] = []
    for i in range(args.rounds):
        seed = args.base_seed + i
        r = run_round(seed, out, args.pytest_args)
        rounds.append(r)
        verdict = "passed" if not r.failed and r.exit_code == 0 else f"{len(r.failed)} failed (exit {r.exit_code})"
        print(f"[flakes] round {i + 1}/{args.rounds}: seed {seed}, {r.tests} tests, {r.seconds:.0f} s, {verdict}",
              flush=True)
    flaky = summarise(rounds)
    summary = {
        "rounds": [{"seed": r.seed, "exit_code": r.exit_code, "seconds": round(r.seconds, 1), "tests": r.tests,
                    "failed": r.failed} for r in rounds],
        "flaky": {k: {"failures": len(v.seeds), "seeds": v.seeds, "first_message": v.first_message}
                  for k, v in flaky.items()},
    }
    (out / "flakes.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(render(rounds, flaky))
    print(f"rounds' JUnit XML and logs: {out.relative_to(REPO) if out.is_relative_to(REPO) else out}")
    return 1 if flaky else 0


if __name__ == "__main__":
    sys.exit(main())
