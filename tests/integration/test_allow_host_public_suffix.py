"""allow_host wildcards over public suffixes are refused (issue 34, item 8c): `*.co.uk` let the code
reach any host anyone registers under co.uk. Debian's public suffix list (package publicsuffix) says
which names those are; a wildcard over one, or over a name with public suffixes below it
(`*.amazonaws.com`: `*.compute.amazonaws.com`, `s3.amazonaws.com`...), is a usage error, from the
command line and from a policy file alike. Without the list no wildcard is accepted."""
import os
import subprocess

import pytest

import sbx
from sbx import assert_usage_error, code, policy_text, sandboxd, weak_policy

REFUSED = [("*.co.uk", "`co.uk` is a public suffix"), ("*.github.io", "`github.io` is a public suffix"),
           ("*.CO.UK.", "`co.uk` is a public suffix"), ("*.xn--55qx5d.cn", "`xn--55qx5d.cn` is a public suffix"),
           ("*.amazonaws.com", "public suffixes lie below `amazonaws.com`"),
           ("*.compute.amazonaws.com", "every name just below `compute.amazonaws.com` is a public suffix")]


@pytest.mark.parametrize("pattern,why", REFUSED, ids=[p for p, _ in REFUSED])
def test_exec_refuses_a_wildcard_over_a_public_suffix(pattern, why):
    r = code("print('must not run')", opts=["--allow-host", pattern])
    assert_usage_error(r, f"--allow-host {pattern}")
    assert f"--allow-host `{pattern}`: {why}" in r.stderr, r.describe()


def test_mcp_refuses_it_at_startup():
    r = sandboxd("mcp", "--allow-host", "*.co.uk", input=b"")
    assert_usage_error(r, "mcp --allow-host *.co.uk")
    assert "`co.uk` is a public suffix" in r.stderr, r.describe()


def test_a_policy_file_line_is_refused_with_its_place():
    path = weak_policy("psl-allow-host", "default.policy", r"max_network\s+proxy",
                       "max_network proxy\nallow_host *.co.uk   # every British host")
    lines = policy_text("default.policy").split("\n")
    line = lines.index(next(l for l in lines if l.startswith("max_network"))) + 2
    for args in (("policy", "check", path), ("exec", "--rootfs", sbx.ROOTFS, "--policy", path, "-c", "pass")):
        r = sandboxd(*args)
        assert_usage_error(r, " ".join(args[:2]))
        assert f"{os.path.basename(path)}:{line}: `allow_host`: `*.co.uk`: `co.uk` is a public suffix" in r.stderr, \
            r.describe()


def test_wildcards_below_registrable_names_still_work():
    r = code("import os; print(os.environ['HTTPS_PROXY'])",
             opts=["--allow-host", "*.pythonhosted.org", "--allow-host", "*.user.github.io"])
    assert r.rc == 0 and r.stdout.strip() == "http://127.0.0.1:3128", r.describe()


def test_without_the_list_no_wildcard_is_accepted():
    """The list hidden in a private mount namespace of the test's own (the host's is untouched): a
    wildcard is refused with a line naming the file and the package; plain names still work."""
    sbx.root_only("hiding /usr/share/publicsuffix needs a mount")
    script = ('mount -t tmpfs none /usr/share/publicsuffix || exit 3; '
              '"$1" exec --rootfs "$2" --allow-host "*.example.com" -c "print(1)"; echo "rc=$?" >&2; '
              '"$1" exec --rootfs "$2" --allow-host "www.example.com" -c "print(2)"')
    p = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh", sbx.SANDBOXD,
                        sbx.ROOTFS], capture_output=True, timeout=120)
    assert p.returncode != 3, p.stderr
    err = p.stderr.decode()
    first, rc = err.split("rc=")
    assert rc.strip() == "125" and len(first.strip().splitlines()) == 1, err
    assert ("--allow-host `*.example.com`: open `/usr/share/publicsuffix/public_suffix_list.dat`: No such file or "
            "directory; a wildcard needs the public suffix list: install the package publicsuffix") in first, err
    assert p.returncode == 0 and p.stdout == b"2\n", (p.stdout, err)
