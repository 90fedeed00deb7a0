"""``junit.xml``: one test case per SLO, so CI systems show each verdict."""

from __future__ import annotations

from typing import Any
from xml.etree import ElementTree as ET


def render(summary: dict[str, Any]) -> str:
    slos = summary.get("slos") or []
    failures = sum(1 for s in slos if not s["passed"])
    suite = ET.Element("testsuite", {
        "name": f"hollowscale.{summary.get('scenario')}",
        "tests": str(len(slos) + 1),
        "failures": str(failures),
        "errors": "0" if summary.get("complete", True) else "1",
        "time": f"{float(summary.get('duration_s') or 0):.3f}",
        "timestamp": str(summary.get("started_at", "")),
    })
    run_case = ET.SubElement(suite, "testcase", {"classname": "hollowscale.run", "name": "run_complete"})
    if not summary.get("complete", True):
        err = ET.SubElement(run_case, "error", {"message": str(summary.get("incomplete_reason") or "incomplete")})
        err.text = "the run did not finish; figures cover only the part that ran"
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
