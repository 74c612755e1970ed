"""Reads a JUnit XML file with junitparser and prints what it holds as JSON: the suites'
totals and every test case's class, name and result (failure messages included)."""
import json
import sys

from junitparser import Failure, JUnitXml

xml = JUnitXml.fromfile(sys.argv[1])
suites = []
for suite in xml:
    cases = []
    for case in suite:
        results = [
            {"kind": type(r).__name__, "message": r.message, "text": r.text}
            for r in case.result
        ]
        cases.append({"classname": case.classname, "name": case.name, "results": results})
    suites.append(
        {
            "name": suite.name,
            "tests": suite.tests,
            "failures": suite.failures,
            "errors": suite.errors,
            "cases": cases,
            "failed": sum(1 for c in suite if any(isinstance(r, Failure) for r in c.result)),
        }
    )
print(json.dumps(suites))
