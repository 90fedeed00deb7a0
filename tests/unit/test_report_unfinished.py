"""A verdict that cannot hide a stuck run: a run that leaves jobs unfinished or deadlocked says so in its
verdict line and exits 3 unless its scenario opts out with a reason, which the verdict then names; every
run's report shows the batch figures it measured.

Recorded data: ``tests/fixtures/reports/gang-contention-default/`` (the default scheduler's run of
``scenarios/gang-contention.yaml``: 50 of 60 jobs unfinished, 18 deadlocked holding all 160 GPUs, its
SLOs met), written by hollowscale before this verdict existed.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

from hollowscale.batch.comparison import comparison_doc, render_html, render_markdown
from hollowscale.batch.feature import BatchObjectsFeature
from hollowscale.batch.report import BatchSection
from hollowscale.report import write_report
from hollowscale.report.verdicts import EXIT_CODES, INCOMPLETE, PASSED, SLO_FAILED, UNFINISHED, finalize, verdict_line
from hollowscale.run.orchestrator import (
    EXIT_INCOMPLETE,
    EXIT_INTERRUPTED,
    EXIT_PASSED,
    EXIT_SLO_FAILED,
    EXIT_UNFINISHED,
)
from hollowscale.run.variants import _SEVERITY
from hollowscale.scenario import load_scenario
from hollowscale.scenario.model import SloSpec

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "tests" / "fixtures" / "reports" / "gang-contention-default"
SMOKE = ROOT / "tests" / "fixtures" / "nightly" / "night" / "smoke" / "01" / "summary.json"
LINE = "PASSED SLOs, but 50 of 60 jobs unfinished (18 deadlocked holding 160 GPUs)"


def recorded() -> dict[str, Any]:
    return json.loads((RUN / "summary.json").read_text())


def gang_slos() -> tuple[SloSpec, ...]:
    return load_scenario(ROOT / "scenarios" / "gang-contention.yaml").slos


def test_the_recorded_deadlocked_run_no_longer_reads_passed() -> None:
    old = recorded()
    assert old["passed"] is True  # what it said when it was written
    assert verdict_line(old) == LINE  # what its report says now, from its own figures
    s = finalize(recorded(), gang_slos())
    assert s["slos_passed"] and not s["passed"]
    assert s["verdict"] == {"state": UNFINISHED, "line": LINE} and EXIT_CODES[UNFINISHED] == EXIT_UNFINISHED == 3
    assert s["unfinished"] == {"counted": "batch jobs (one job = its Jobs, bare Pods and their pods)", "jobs": 60,
                               "unfinished": 50, "deadlocked": 18, "gpus_held": 160.0, "stuck": True, "allowed": None}


def test_its_summary_md_and_report_html_say_so_and_show_the_batch_figures(tmp_path: Path) -> None:
    s = finalize(recorded(), gang_slos())
    series = json.loads((RUN / "series.json").read_text())
    paths = write_report(tmp_path / "run", s, series["timeline"], series["prometheus"], [BatchSection()])
    md = paths["summary.md"].read_text()
    assert md.splitlines()[0].endswith(f"- **{LINE}**")
    assert "## Batch scheduling" in md
    assert "| jobs submitted / completed / failed / unfinished | 60 / 10 / 0 / 50 |" in md
    assert "| deadlocked at the end (partially started, holding GPUs) | 18, holding 160 GPUs: " in md
    assert "and 13 more |" in md
    assert "| partially started jobs: max at once / avg / ever | 18 / 14.6 / 18 |" in md
    assert "| GPU-seconds held by partially started jobs | 60,207.6 |" in md
    assert "### Queue wait (s, exact: timeline)" in md and "| queue (none) | 0.08 | 6.91 | 10 | 50 |" in md
    assert "| hollowscale-gang-ml | 100 | 100 | 0 | 451 |" in md  # the team's share while saturated
    page = paths["report.html"].read_text()
    assert f"<div class='banner bad'><b>{LINE}</b>" in page
    assert "<h2 id='batch'>Batch scheduling</h2>" in page and "<td>60 / 10 / 0 / 50</td>" in page
    suite = ET.parse(paths["junit.xml"]).getroot().find("testsuite")
    assert suite is not None and suite.get("failures") == "1"
    [case] = [c for c in suite.iter("testcase") if c.get("name") == "jobs_finished"]
    failure = case.find("failure")
    assert failure is not None and failure.get("message") == "50 of 60 jobs unfinished (18 deadlocked holding 160 GPUs)"


def test_the_opt_out_is_named_in_the_verdict(tmp_path: Path) -> None:
    why = "the default scheduler is expected to deadlock here: the comparison shows how often"
    s = finalize(recorded(), gang_slos(), allow_unfinished=why)
    assert s["passed"] and s["verdict"]["state"] == PASSED
    assert s["verdict"]["line"] == f"PASSED (50 of 60 jobs unfinished (18 deadlocked holding 160 GPUs); " \
                                   f"allowed by the scenario: {why})"
    junit = write_report(tmp_path / "run", s, {}, None)["junit.xml"].read_text()
    assert "<skipped message=\"50 of 60 jobs unfinished" in junit and why in junit


def test_an_slo_failure_and_an_incomplete_run_come_first_and_still_say_what_was_left() -> None:
    strict = SloSpec(name="all_finished", metric="jobs.unfinished", op="<=", threshold=0)
    s = finalize(recorded(), [*gang_slos(), strict])
    assert s["verdict"] == {"state": SLO_FAILED, "line": "FAILED: SLO all_finished missed; 50 of 60 jobs unfinished "
                                                         "(18 deadlocked holding 160 GPUs)"}
    cut = recorded()
    cut.update(complete=False, incomplete_reason="interrupted by SIGINT")
    s = finalize(cut, gang_slos())
    assert s["verdict"]["state"] == INCOMPLETE and not s["passed"]
    assert s["verdict"]["line"].startswith("FAILED (INCOMPLETE: interrupted by SIGINT); 50 of 60 jobs unfinished")
    # the runner exits with the verdict's code; the variants' with the worst, a stuck run worse than a pass
    # and better than a missed SLO
    assert EXIT_CODES == {PASSED: EXIT_PASSED, SLO_FAILED: EXIT_SLO_FAILED, INCOMPLETE: EXIT_INCOMPLETE,
                          UNFINISHED: EXIT_UNFINISHED}
    assert _SEVERITY[0] < _SEVERITY[EXIT_UNFINISHED] < _SEVERITY[EXIT_SLO_FAILED] < _SEVERITY[EXIT_INTERRUPTED]


def test_a_run_without_batch_figures_counts_its_workload_objects_and_gets_no_batch_section(tmp_path: Path) -> None:
    smoke = json.loads(SMOKE.read_text())
    s = finalize(copy.deepcopy(smoke), [])
    assert s["unfinished"]["counted"] == "workload objects (Jobs and bare Pods)" and not s["unfinished"]["stuck"]
    assert s["verdict"] == {"state": PASSED, "line": "PASSED"}
    assert BatchSection().markdown(s) == [] and BatchSection().html(s) == []
    smoke["measurements"]["jobs"]["unfinished"] = 3
    assert finalize(smoke, [])["verdict"]["line"] == "PASSED SLOs, but 3 of 25 jobs unfinished"
    # the run's batch feature is the section the report renders
    assert isinstance(BatchObjectsFeature(load_scenario(ROOT / "scenarios" / "smoke.yaml"), "r"), BatchSection)


def test_the_comparison_of_variants_shows_each_verdict_line() -> None:
    stuck = finalize(recorded(), gang_slos())
    fine = copy.deepcopy(stuck)
    fine["measurements"]["batch"]["instances"].update(completed=60, unfinished=0)
    fine["measurements"]["batch"]["deadlocked_jobs"].update(count=0, gpus_held=0.0, instances=[])
    finalize(fine, gang_slos())
    doc = comparison_doc("gang-contention", [("default", stuck), ("gang", fine)])
    assert [(r["state"], r["verdict"]) for r in doc["variants"]] == [(UNFINISHED, LINE), (PASSED, "PASSED")]
    assert f"| verdict | {LINE} | PASSED |" in render_markdown(doc)
    page = render_html(doc, [("default", {}), ("gang", {})])
    assert f"<td class='fail'>{LINE}</td><td class='pass'>PASSED</td>" in page
    # a comparison.json written before verdict lines still renders
    for r in doc["variants"]:
        del r["verdict"], r["state"]
    assert "| verdict | FAILED | PASSED |" in render_markdown(doc)  # from its passed flag


def test_allow_unfinished_is_a_reason() -> None:
    sc = load_scenario(ROOT / "scenarios" / "gang-contention.yaml")
    assert sc.measurements.allow_unfinished is None
    doc = sc.to_dict()
    assert doc["measurements"]["allow_unfinished"] is None
