"""``junit.xml``: one test case per SLO, so CI systems show each verdict, and one for the jobs left
unfinished or deadlocked at the end (skipped, with the reason, when the scenario allows them)."""

from __future__ import annotations

from typing import Any
from xml.etree import ElementTree as ET

from hollowscale.report.verdicts import left_text


def render(summary: dict[str, Any]) -> str:
    slos = summary.get("slos") or []
    left = summary.get("unfinished")
    stuck = bool(left and left.get("stuck") and not left.get("allowed"))
    failures = sum(1 for s in slos if not s["passed"]) + stuck
    suite = ET.Element("testsuite", {
        "name": f"hollowscale.{summary.get('scenario')}",
        "tests": str(len(slos) + 1 + (left is not None)),
        "failures": str(failures),
        "errors": "0" if summary.get("complete", True) else "1",
        "time": f"{float(summary.get('duration_s') or 0):.3f}",
        "timestamp": str(summary.get("started_at", "")),
    })
    run_case = ET.SubElement(suite, "testcase", {"classname": "hollowscale.run", "name": "run_complete"})
    if not summary.get("complete", True):
        err = ET.SubElement(run_case, "error", {"message": str(summary.get("incomplete_reason") or "incomplete")})
        err.text = "the run did not finish; figures cover only the part that ran"
    if left is not None:
        case = ET.SubElement(suite, "testcase", {"classname": "hollowscale.run", "name": "jobs_finished"})
        if stuck:
            ET.SubElement(case, "failure", {"message": left_text(left)}).text = (
                f"counted: {left.get('counted')}; allow with measurements.allow_unfinished: <reason>")
        elif left.get("stuck"):
            ET.SubElement(case, "skipped", {"message": f"{left_text(left)}; allowed by the scenario: {left['allowed']}"})
    for s in slos:
        case = ET.SubElement(suite, "testcase", {"classname": "hollowscale.slo", "name": s["name"]})
        props = ET.SubElement(case, "properties")
        for k in ("metric", "op", "threshold", "value"):
            ET.SubElement(props, "property", {"name": k, "value": str(s.get(k))})
        if not s["passed"]:
            f = ET.SubElement(case, "failure", {"message": f"{s['metric']} = {s['value']} violates {s['op']} {s['threshold']}"})
            f.text = s.get("note") or s.get("description") or ""
    suites = ET.Element("testsuites")
    suites.append(suite)
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"
