"""The suite's own rules: with CI=true a skipped security test is a failure (tests/conftest.py),
except a skip that says the property does not exist in this run (sbx.NotApplicable); and
tests/run's options. Each runs a small pytest session in a subprocess with the real conftest."""
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

import sbx

CONFTEST = os.path.join(sbx.TESTS, "conftest.py")

# The real tests/conftest.py, loaded as this session's conftest.
SHIM = f"""
import importlib.util, sys
sys.path.insert(0, {os.path.join(sbx.TESTS, "integration")!r})
_spec = importlib.util.spec_from_file_location("sandboxd_conftest", {CONFTEST!r})
_m = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_m)
for _n in ("pytest_configure", "pytest_runtest_makereport"):
    if hasattr(_m, _n):
        globals()[_n] = getattr(_m, _n)
"""

SECURITY = """
import pytest, sbx
pytestmark = pytest.mark.security
def test_plain_skip(): pytest.skip("a host feature is missing")
@pytest.mark.skipif(True, reason="a skipif mark")
def test_skipif(): pass
def test_need(): sbx.need(False, "a host feature is missing")
def test_need_security(): sbx.need(False, "a host feature is missing", security=True)
def test_not_applicable(): sbx.need(False, "nothing to defend without the feature", security=False)
def test_root_only(): sbx.root_only("a root-only defense")
@pytest.mark.xfail(reason="known", strict=True)
def test_xfail(): assert False
def test_passes(): pass
"""

OTHER = """
import pytest
def test_other_skip(): pytest.skip("not a security test")
"""


def session(tmp_path, **env):
    """Outcome of each test of the session above: passed, failed or skipped."""
    (tmp_path / "conftest.py").write_text(SHIM)
    (tmp_path / "test_security_rules.py").write_text(SECURITY)
    (tmp_path / "test_other_rules.py").write_text(OTHER)
    xml = tmp_path / "out.xml"
    e = {k: v for k, v in os.environ.items() if k not in ("CI", "SANDBOXD_ROOT_RUN")}
    e.update(env)
    p = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--rootdir", str(tmp_path),
                        "--junitxml", str(xml), str(tmp_path)], env=e, capture_output=True, text=True, timeout=60)
    assert xml.exists(), p.stdout + p.stderr
    out = {}
    for case in ET.parse(xml).getroot().iter("testcase"):
        kinds = {c.tag for c in case}
        out[case.get("name")] = ("failed" if kinds & {"failure", "error"} else
                                 "skipped" if "skipped" in kinds else "passed")
    return out


ROOT = "passed" if sbx.IS_ROOT else "skipped"
BASE = {"test_plain_skip": "skipped", "test_skipif": "skipped", "test_need": "skipped",
        "test_need_security": "skipped", "test_not_applicable": "skipped", "test_root_only": ROOT,
        "test_xfail": "skipped", "test_passes": "passed", "test_other_skip": "skipped"}


def test_outside_ci_a_skip_is_a_skip(tmp_path):
    assert session(tmp_path) == BASE


@pytest.mark.parametrize("root_run", [False, True])
def test_in_ci_a_skipped_security_test_fails(tmp_path, root_run):
    want = dict(BASE, test_plain_skip="failed", test_skipif="failed", test_need="failed",
                test_need_security="failed")
    if not sbx.IS_ROOT and not root_run:
        want["test_root_only"] = "failed"  # nothing covers it: no root run of the suite
    got = session(tmp_path, CI="true", **({"SANDBOXD_ROOT_RUN": "1"} if root_run else {}))
    assert got == want


RUN = os.path.join(sbx.TESTS, "run")


def test_run_help_prints_the_usage():
    if not os.access(RUN, os.X_OK):
        pytest.skip(f"{RUN} is not here (a staged copy of the tests)")
    p = subprocess.run([RUN, "--help"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("Run every sandboxd test") and "--only" in p.stdout, p.stdout
    assert "set -" not in p.stdout and "#" not in p.stdout, p.stdout


def test_run_only_refuses_an_unknown_suite():
    if not os.access(RUN, os.X_OK):
        pytest.skip(f"{RUN} is not here (a staged copy of the tests)")
    p = subprocess.run([RUN, "--only", "unit,nonesuch"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and p.stdout == "", p
    assert p.stderr.count("\n") == 1 and "`nonesuch'" in p.stderr, p.stderr
