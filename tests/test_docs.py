"""The manual pages: clean under `mandoc -Tlint`, rendered by man(1), and complete with respect to
the code they document (every policy key, every `exec` and `mcp` option, every seccomp group,
every function of the sandbox's `mcp.runtime`).

Run from the repository root: `pytest tests/test_docs.py`.
"""
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = ["man/sandboxd.1", "man/sandboxd.policy.5", "man/sandboxd-mcp.7"]

# The project's own pages: until `make install` puts them in /usr/share/man, mandoc's Xr check
# cannot find them ("STYLE: referenced manual not found"). Any other missing page is a typo.
OWN_PAGES = {("sandboxd", "1"), ("sandboxd.policy", "5"), ("sandboxd-mcp", "7")}

# mandoc 1.14 looks up every Xr target; without a mandoc.db (Debian has none) it finds the page in
# the file system and says so on stderr. That is about the host's database, not about the page.
DB_NOTICE = re.compile(r"^mandoc: outdated mandoc\.db (lacks|contains bogus) ")
XR_NOT_FOUND = re.compile(r"STYLE: referenced manual not found: Xr (\S+) (\S+)")


def need(tool):
    """Skip when a tool is missing, except in CI, where the docs must be checked."""
    if shutil.which(tool):
        return
    if os.environ.get("CI"):
        pytest.fail(f"{tool} is not installed, and CI is set: install it (scripts/install-deps)")
    pytest.skip(f"{tool} is not installed")


def read(rel):
    return (ROOT / rel).read_text()


def documented_items(page, macro):
    """Words documented as list items of `page`, e.g. `.It Ic timeout Ar duration` -> timeout."""
    items = set()
    for line in read(page).splitlines():
        if line.startswith(".It "):
            words = line.split()
            for i, w in enumerate(words[:-1]):
                if w == macro:
                    items.add(words[i + 1])
    return items


@pytest.mark.parametrize("page", PAGES)
def test_mandoc_lint_is_clean(page):
    need("mandoc")
    r = subprocess.run(["mandoc", "-Tlint", page], cwd=ROOT, capture_output=True, text=True)
    problems = []
    for line in (r.stdout + r.stderr).splitlines():
        if DB_NOTICE.match(line):
            continue
        m = XR_NOT_FOUND.search(line)
        if m and (m.group(1), m.group(2)) in OWN_PAGES:
            continue
        problems.append(line)
    assert not problems, "mandoc -Tlint:\n" + "\n".join(problems)


@pytest.mark.parametrize("page", PAGES)
def test_man_renders(page):
    need("man")
    env = dict(os.environ, MANPAGER="cat", PAGER="cat", MANWIDTH="80", LC_ALL="C.UTF-8")
    r = subprocess.run(["man", "-l", page], cwd=ROOT, capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert not r.stderr.strip(), r.stderr
    name = Path(page).name.rsplit(".", 1)
    assert f"{name[0].upper()}({name[1]})" in r.stdout
    assert "NAME" in r.stdout and "SEE ALSO" in r.stdout


def policy_keys():
    keys = re.findall(r'^\s*\{\s*"([a-z_]+)",\s*K_[A-Z]+', read("src/policy/policy.c"), re.M)
    assert len(keys) > 20, "could not parse keys[] in src/policy/policy.c"
    return keys


def test_every_policy_key_is_documented():
    documented = documented_items("man/sandboxd.policy.5", "Ic")
    # Scalar keys from the parser's table, and the directives it handles by name.
    extra = ["env", "proc_mask", "proc_readonly", "seccomp_default", "seccomp_badarch", "host_id_range"]
    missing = [k for k in policy_keys() + extra if k not in documented]
    assert not missing, f"keys not documented as `.It Ic KEY` in sandboxd.policy.5: {missing}"
    page = read("man/sandboxd.policy.5")
    for directive in ["include", "group", "allow", "errno", "kill"]:
        assert re.search(rf"^\.(?:\S+ )*Ic {directive}\b", page, re.M), directive


def test_documented_defaults_match_default_policy():
    """`.It Ic KEY Ar TYPE Pq DEFAULT` must give the value policy/default.policy sets."""
    values = {}
    for line in read("policy/default.policy").splitlines():
        words = line.split("#", 1)[0].split()
        if len(words) == 2:
            values[words[0]] = words[1]
    stated = {}
    for line in read("man/sandboxd.policy.5").splitlines():
        m = re.match(r"^\.It Ic (\w+) .*\bPq (?:Ql |Cm )?(\S+)$", line)
        if m:
            stated[m.group(1)] = m.group(2)
    wrong = []
    for key in policy_keys():
        if key == "description":
            continue
        assert key in values, f"`{key}` is not set in policy/default.policy"
        if stated.get(key) != values[key]:
            wrong.append(f"{key}: page says {stated.get(key)!r}, default.policy has {values[key]!r}")
    assert not wrong, "sandboxd.policy.5 defaults out of date:\n" + "\n".join(wrong)


def long_options(path, at_least):
    src = read(path)
    block = re.search(r"longopts\[\]\s*=\s*\{(.*?)\n\s*\};", src, re.S)
    assert block, f"could not find longopts[] in {path}"
    opts = re.findall(r'\{\s*"([a-z][a-z0-9-]*)",\s*(?:no|required|optional)_argument', block.group(1))
    assert len(opts) >= at_least, f"could not parse longopts[] in {path}"
    return opts


def exec_long_options():
    return long_options("src/cli/cli_exec.c", 10)


def test_every_exec_option_is_documented():
    documented = documented_items("man/sandboxd.1", "Fl")
    missing = [o for o in exec_long_options() if f"-{o}" not in documented]
    assert not missing, f"exec options not documented as `.It Fl -OPTION` in sandboxd.1: {missing}"


def syscall_groups():
    groups = {}
    for inc in sorted((ROOT / "policy").glob("*.inc")):
        for name in re.findall(r"^group\s+(\S+)", inc.read_text(), re.M):
            groups.setdefault(name, inc.name)
    assert groups, "no `group` lines in policy/*.inc"
    return groups


def test_every_seccomp_group_is_documented():
    documented = documented_items("man/sandboxd.policy.5", "Cm")
    missing = [f"{g} ({f})" for g, f in syscall_groups().items() if g not in documented]
    assert not missing, f"seccomp groups not documented as `.It Cm GROUP` in sandboxd.policy.5: {missing}"


def test_every_command_is_documented():
    page = read("man/sandboxd.1")
    for cmd in ["exec", "policy check", "policy show", "policy diff", "doctor", "version", "mcp",
                "rootfs build", "rootfs fetch", "rootfs import", "rootfs list", "rootfs verify", "rootfs remove"]:
        assert re.search(rf"^\.It Cm {re.escape(cmd)}\b", page, re.M), cmd


def test_environment_and_exit_status_are_documented():
    page = read("man/sandboxd.1")
    env = page.split(".Sh ENVIRONMENT", 1)[1].split(".Sh ", 1)[0]
    for var in ["SANDBOXD_ROOTFS", "SANDBOXD_POLICY_DIR", "SANDBOXD_CACHE_DIR", "SANDBOXD_CGROUP",
                "XDG_CACHE_HOME", "HOME"]:
        assert f".It Ev {var}\n" in env, var
    status = page.split(".Sh EXIT STATUS", 1)[1].split(".Sh ", 1)[0]
    for code in ["124", "125", "128+"]:
        assert code in status, code
    for section in [".Sh SECURITY CONSIDERATIONS", ".Sh THREAT MODEL", ".Sh EXAMPLES", ".Sh FILES"]:
        assert section in page, section


def test_every_mcp_option_is_documented():
    documented = documented_items("man/sandboxd-mcp.7", "Fl")
    opts = long_options("src/cli/cli_mcp.c", 8)
    missing = [o for o in opts if f"-{o}" not in documented]
    assert not missing, f"mcp options not documented as `.It Fl -OPTION` in sandboxd-mcp.7: {missing}"


def runtime_functions():
    """Public module-level functions of the sandbox's `mcp.runtime` (def or async def, no `_`)."""
    src = read("src/inside/mcp/runtime.py")
    names = re.findall(r"^(?:async\s+)?def\s+([A-Za-z][A-Za-z0-9_]*)\s*\(", src, re.M)
    assert len(names) > 10, "could not parse the functions of src/inside/mcp/runtime.py"
    return names


def test_every_runtime_function_is_documented():
    page = read("man/sandboxd-mcp.7")
    missing = [f for f in runtime_functions() if not re.search(rf"^\.(?:\S+ )*Fn {re.escape(f)}\b", page, re.M)]
    assert not missing, f"mcp.runtime functions not documented with `Fn NAME` in sandboxd-mcp.7: {missing}"
    assert re.search(r"^\.(?:\S+ )*Dv MCPError\b", page, re.M), "MCPError"


def test_mcp_page_covers_the_proxy():
    page = read("man/sandboxd-mcp.7")
    for section in [".Sh THE RUN_PYTHON TOOL", ".Sh PROTOCOL", ".Sh THE PYTHON API", ".Sh THE PROXY",
                    ".Sh THE BRIDGE", ".Sh ENVIRONMENT", ".Sh EXAMPLES", ".Sh SECURITY CONSIDERATIONS"]:
        assert section in page, section
    for var in ["SANDBOXD_MCP_CONFIG", "SANDBOXD_PYTHON_DIR", "SANDBOXD_AUDIT_LOG", "SANDBOXD_MCP_SERVERS"]:
        assert f"Ev {var}" in page, var
    for word in ["sandboxd://capabilities", "mcpServers", "claude mcp add", "server-memory",
                 "from mcp.servers.", "SCM_RIGHTS"]:
        assert word in page, word
