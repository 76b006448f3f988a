"""pytest configuration for the sandboxd integration suite (tests/integration/).

The binary comes from $SANDBOXD (default build/sandboxd), the rootfs from $SANDBOXD_ROOTFS
(default rootfs/python-3.14-slim); every `sandboxd exec` gets `--rootfs` explicitly. Run the
whole thing, as root and as an unprivileged user, with tests/run."""
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "integration"))

import sbx  # noqa: E402


def pytest_configure(config):
    config.addinivalue_line("markers", "security: an isolation property; never skipped when CI=true")
    config.addinivalue_line("markers", "slow: left out of `make check-quick` (tests/run --quick), never of make check")


# The modules `make check-quick` leaves out: other rootfs trees (data, node) and the longest
# network setups. make check runs them all.
SLOW_MODULES = {"test_egress_pip", "test_data", "test_node", "test_egress_mcp", "test_mcp_http"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.module.__name__.rsplit(".", 1)[-1] in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """CI=true: a skipped security test (marked `security`, as every file in tests/security is) is
    a failure, unless it skipped with sbx.NotApplicable (sbx.root_only, need(..., security=False))."""
    outcome = yield
    rep = outcome.get_result()
    if (sbx.CI and rep.skipped and not hasattr(rep, "wasxfail") and item.get_closest_marker("security")
            and not (call.excinfo and call.excinfo.errisinstance(sbx.NotApplicable))):
        reason = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
        rep.outcome = "failed"
        rep.longrepr = f"CI=true and a security test was skipped: {reason}"


def pytest_report_header(config):
    return [f"sandboxd: {sbx.SANDBOXD}", f"rootfs: {sbx.ROOTFS}", f"work: {sbx.WORK}",
            f"running as uid {os.getuid()} (sandbox uid 1000 -> host uid "
            f"{'one of host_id_range %d %d' % sbx.host_id_range() if sbx.IS_ROOT else os.getuid()}), CI={sbx.CI}"]


_INTEGRATION = os.path.join(os.path.dirname(os.path.abspath(__file__)), "integration")


@pytest.fixture(autouse=True)
def _need_binary(request):
    """Integration tests run sandboxd: they need the binary and the rootfs (skip locally, fail in
    CI). Other test directories under tests/ are left alone."""
    if str(request.node.fspath).startswith(_INTEGRATION + os.sep):
        sbx.require_sandboxd()


def pytest_sessionfinish(session, exitstatus):
    import shutil
    shutil.rmtree(os.path.join(sbx.WORK, "reports"), ignore_errors=True)


@pytest.fixture
def host_dir(tmp_path):
    """A host directory the sandbox uid may read and write (for --bind / --bind-rw)."""
    tmp_path.chmod(0o777)
    d = tmp_path
    while d != d.parent and str(d) != "/":
        try:
            os.chmod(d, os.stat(d).st_mode | 0o011)  # searchable by the sandbox's host uid
        except PermissionError:
            break
        d = d.parent
    return tmp_path
