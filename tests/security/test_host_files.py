"""Host files sandboxd writes or trusts (the report, the audit log, the seccomp filter cache) are
never steered by what the code planted in a tree it can write (issue #12, item 1).

Each test plants from inside a real sandbox, through a --bind-rw directory, what an attacker
would: a symlink or hardlink in place of the file, a symlinked directory on the path of a later
run, a forged filter in the cache. A file under the test's tmp dir stands in for a host file
such as /etc/passwd. Run as root (the sandbox is host uid 65534) and as the unprivileged user
(the sandbox is the user's own uid), where only the rules sandboxd applies can tell them apart."""
import json
import os
import stat

import pytest

import sbx
from sbx import code

pytestmark = pytest.mark.security

PRECIOUS = "precious host file\n"


def victim(path):
    """A host file outside the sandbox's reach that sandboxd must never write."""
    path.write_text(PRECIOUS)
    path.chmod(0o644)
    return path


def one_line(r):
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert len(lines) == 1, r.describe()
    return lines[0]


def rw_dir(parent, name):
    d = parent / name
    d.mkdir()
    d.chmod(0o777)  # writable by the sandbox's host uid
    return d


def plant(src, opts):
    """A first run whose code plants something; it must succeed."""
    r = code(src, opts=list(opts), want_report=False)
    assert r.rc == 0, r.describe()
    return r


# ---------------------------------------------------------------- the report


def test_report_replaced_by_a_symlink_during_the_run(host_dir):
    """The code replaces report.json with a symlink to a host file: the report still lands in
    its directory as a regular file (rename over the symlink), the host file is untouched."""
    out = rw_dir(host_dir, "out")
    target = victim(host_dir / "passwd")
    report = out / "report.json"
    report.write_text("{}")
    src = f"import os\nos.unlink('/workspace/out/report.json')\nos.symlink({str(target)!r}, '/workspace/out/report.json')"
    r = code(src, opts=["--bind-rw", f"{out}:/workspace/out", "--report", str(report)], want_report=False)
    assert r.rc == 0, r.describe()
    assert target.read_text() == PRECIOUS, "sandboxd wrote the report through the code's symlink"
    st = os.lstat(report)
    assert stat.S_ISREG(st.st_mode), "the report is not a regular file"
    assert json.loads(report.read_text())["exit_code"] == 0
    assert sorted(os.listdir(out)) == ["report.json"], "a temporary file was left behind"


@pytest.mark.parametrize("depth", ["out", "a/b/out"])
def test_report_through_a_symlinked_directory_planted_by_an_earlier_run(host_dir, depth):
    """A first run leaves WORK/out -> a host directory; a second run with the same --bind-rw and
    --report WORK/out/report.json is refused (125, one line) before anything runs, instead of
    writing into the host directory. Deeper plants (WORK/a/b/out) are found by walking up."""
    work = rw_dir(host_dir, "work")
    etc = host_dir / "etc"
    etc.mkdir()
    target = victim(etc / "report.json")
    parent = os.path.dirname(depth)
    if parent:
        os.makedirs(work / parent)
        for d in (work / "a", work / "a" / "b"):
            d.chmod(0o777)
    bind = ["--bind-rw", f"{work}:/workspace/work"]
    plant(f"import os\nos.symlink({str(etc)!r}, '/workspace/work/{depth}')", bind)
    report = f"{work}/{depth}/report.json"
    r = code("open('/workspace/ran', 'w'); print('ran')", opts=bind + ["--report", report], want_report=False)
    assert r.rc == 125, r.describe()
    line = one_line(r)
    assert report in line and "symlink" in line, line
    assert r.stdout == "", "the code ran although its report path was refused"
    assert target.read_text() == PRECIOUS and os.listdir(etc) == ["report.json"]


def test_report_through_a_symlink_of_the_user_is_followed(host_dir):
    """No false alarm: a symlink the invoking user made, outside every --bind-rw tree, is fine."""
    real = host_dir / "real"
    real.mkdir()
    (host_dir / "link").symlink_to(real)
    r = code("pass", opts=["--report", str(host_dir / "link" / "r.json")], want_report=False)
    assert r.rc == 0, r.describe()
    assert json.loads((real / "r.json").read_text())["exit_code"] == 0


def test_report_path_is_refused_before_the_run_when_its_directory_is_missing(host_dir):
    r = code("print('ran')", opts=["--report", str(host_dir / "nope" / "r.json")], want_report=False)
    assert r.rc == 125 and r.stdout == "", r.describe()
    assert str(host_dir / "nope" / "r.json") in one_line(r)


# ---------------------------------------------------------------- the audit log


def test_audit_log_replaced_by_a_symlink_planted_by_an_earlier_run(host_dir):
    logs = rw_dir(host_dir, "logs")
    target = victim(host_dir / "passwd")
    bind = ["--bind-rw", f"{logs}:/workspace/logs"]
    plant(f"import os\nos.symlink({str(target)!r}, '/workspace/logs/audit.log')", bind + ["--audit-log", "off"])
    log = logs / "audit.log"
    r = code("print('ran')", opts=bind + ["--audit-log", str(log)], want_report=False)
    assert r.rc == 125 and r.stdout == "", r.describe()
    line = one_line(r)
    assert str(log) in line and "symlink" in line, line
    assert target.read_text() == PRECIOUS


def test_audit_log_replaced_by_a_hardlink_planted_by_an_earlier_run(host_dir):
    """A hardlink can only name a file on the same mount, so the stand-in lives in the bound
    tree; it is world-writable so that fs.protected_hardlinks lets the sandbox link it."""
    logs = rw_dir(host_dir, "logs")
    target = victim(logs / "precious")
    target.chmod(0o666)
    bind = ["--bind-rw", f"{logs}:/workspace/logs"]
    plant("import os\nos.link('/workspace/logs/precious', '/workspace/logs/audit.log')", bind + ["--audit-log", "off"])
    log = logs / "audit.log"
    r = code("print('ran')", opts=bind + ["--audit-log", str(log)], want_report=False)
    assert r.rc == 125 and r.stdout == "", r.describe()
    line = one_line(r)
    assert str(log) in line and "link" in line, line
    assert target.read_text() == PRECIOUS


def test_audit_log_replaced_by_a_symlink_during_the_run(host_dir):
    """The log is opened before the run: what the code does to the name afterwards changes
    nothing about which file the record goes to."""
    logs = rw_dir(host_dir, "logs")
    target = victim(host_dir / "passwd")
    log = logs / "audit.log"
    src = ("import os, contextlib\nwith contextlib.suppress(FileNotFoundError):\n    os.unlink('/workspace/logs/audit.log')\n"
           f"os.symlink({str(target)!r}, '/workspace/logs/audit.log')")
    r = code(src, opts=["--bind-rw", f"{logs}:/workspace/logs", "--audit-log", str(log)], want_report=False)
    assert r.rc == 0, r.describe()
    assert target.read_text() == PRECIOUS, "sandboxd appended the audit record through the code's symlink"


def test_audit_log_directory_symlink_planted_by_an_earlier_run(host_dir):
    """The default-path case: sandboxd creates the log's directories itself (mkdir -p); a planted
    directory symlink on the way is refused, nothing is created where it points."""
    state = rw_dir(host_dir, "state")
    elsewhere = host_dir / "elsewhere"
    elsewhere.mkdir()
    bind = ["--bind-rw", f"{state}:/workspace/state"]
    plant(f"import os\nos.symlink({str(elsewhere)!r}, '/workspace/state/sandboxd')", bind + ["--audit-log", "off"])
    log = state / "sandboxd" / "sub" / "audit.log"
    r = code("print('ran')", opts=bind + ["--audit-log", str(log)], want_report=False)
    assert r.rc == 125 and r.stdout == "", r.describe()
    assert "symlink" in one_line(r)
    assert os.listdir(elsewhere) == []


def test_mcp_refuses_an_audit_log_it_would_have_to_follow(host_dir):
    """`sandboxd mcp` opens its audit log at start, by the same rules: a symlink in place of the
    log stops it with 125 and one line, before it serves anything."""
    import subprocess
    target = victim(host_dir / "passwd")
    log = host_dir / "audit.log"
    log.symlink_to(target)
    p = subprocess.run([sbx.SANDBOXD, "mcp", "--rootfs", sbx.ROOTFS, "--warm", "0", "--audit-log", str(log)],
                       input="", capture_output=True, text=True, timeout=30)
    lines = [l for l in p.stderr.splitlines() if l.strip()]
    assert p.returncode == 125 and p.stdout == "", (p.returncode, p.stdout, p.stderr)
    assert len(lines) == 1 and str(log) in lines[0] and "symlink" in lines[0], lines
    assert target.read_text() == PRECIOUS


def test_mcp_audit_log_through_a_bind_rw_tree_is_refused(host_dir):
    """`sandboxd mcp --bind-rw` guards its audit log as exec does: a directory symlink an earlier
    sandbox planted in the tree (unprivileged: owned by the user, so only the tree rule tells it
    from the user's own) stops the server with 125 and one line; nothing is created through it."""
    import subprocess
    state = rw_dir(host_dir, "state")
    elsewhere = host_dir / "elsewhere"
    elsewhere.mkdir()
    bind = ["--bind-rw", f"{state}:/workspace/state"]
    plant(f"import os\nos.symlink({str(elsewhere)!r}, '/workspace/state/sandboxd')", bind + ["--audit-log", "off"])
    log = state / "sandboxd" / "sub" / "audit.log"
    p = subprocess.run([sbx.SANDBOXD, "mcp", "--rootfs", sbx.ROOTFS, "--warm", "0", *bind, "--audit-log", str(log)],
                       input="", capture_output=True, text=True, timeout=30)
    lines = [l for l in p.stderr.splitlines() if l.strip()]
    assert p.returncode == 125 and p.stdout == "", (p.returncode, p.stdout, p.stderr)
    assert len(lines) == 1 and "symlink" in lines[0], lines
    assert os.listdir(elsewhere) == []
