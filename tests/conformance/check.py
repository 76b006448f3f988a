#!/usr/bin/env python3
"""The conformance runs judged: check.py OUT_DIR EXPECTED RESULTS.

OUT_DIR holds one directory per mode and revision (MODE-REV, as `run` names them), each with the
suite's server-SCENARIO-TIME/checks.json. Every scenario's outcome is written to RESULTS, a line
each: MODE REV SCENARIO pass|fail|expected, then the failing checks. A check fails when its status
is FAILURE (WARNING and SKIPPED do not). EXPECTED lists the failures allowed, a line each:
MODE SCENARIO CHECK, where MODE and CHECK may be `*`, then `#` and why. The last lines are counts in
node's test-runner form (`ℹ pass N`), which tests/suites.sh reads: a scenario with a failure not
listed is a failed test; a listed failure that no longer happens is reported, to prune the list."""
import fnmatch
import json
import os
import re
import sys


def load_expected(path):
    rules = []
    for line in open(path):
        line = line.split("#", 1)[0].split()
        if line:
            assert len(line) == 3, "expected: MODE SCENARIO CHECK: %r" % line
            rules.append(tuple(line))
    return rules


def allowed(rules, mode, scenario, check, used):
    for r in rules:
        if fnmatch.fnmatchcase(mode, r[0]) and r[1] == scenario and fnmatch.fnmatchcase(check, r[2]):
            used.add(r)
            return True
    return False


def main():
    out, expected, results = sys.argv[1:4]
    rules = load_expected(expected)
    used = set()
    lines, passed, failed, unexpected = [], 0, 0, []
    runs = sorted(d for d in os.listdir(out) if os.path.isdir(os.path.join(out, d)))
    if not runs:
        print("conformance: no run left results in %s" % out)
    for run in runs:
        mode, rev = run.split("-", 1)
        scenarios = sorted(os.listdir(os.path.join(out, run)))
        if not scenarios:
            unexpected.append("%s %s: the suite ran no scenario (see %s.log)" % (mode, rev, run))
            failed += 1
        for d in scenarios:
            name = re.sub(r"^server-|-\d{4}-\d\d-\d\dT[0-9-]+Z$", "", d)
            path = os.path.join(out, run, d, "checks.json")
            checks = json.load(open(path)) if os.path.exists(path) else []
            bad = sorted({c["id"] for c in checks if c.get("status") == "FAILURE"})
            if not checks:
                bad = ["(no checks.json)"]
            news = [c for c in bad if not allowed(rules, mode, name, c, used)]
            outcome = "fail" if news else "expected" if bad else "pass"
            lines.append(" ".join([mode, rev, name, outcome] + bad))
            if news:
                failed += 1
                unexpected += ["%s %s %s %s" % (mode, rev, name, c) for c in news]
            else:
                passed += 1
    with open(results, "w") as f:
        f.write("# tests/conformance/run: MODE REVISION SCENARIO pass|fail|expected [failing checks]\n")
        f.write("\n".join(lines) + "\n")
    for u in unexpected:
        print("✖ unexpected failure: " + u)
    for r in rules:
        if r not in used:
            print("note: listed in expected but not failing any more: " + " ".join(r))
    print("ℹ pass %d\nℹ fail %d\nℹ skipped 0" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
