"""The policy side of opt-in egress (#17): `network`, `max_network` and `allow_host` in policies,
`--allow-host` on exec and mcp. The proxy itself: test_egress*.py."""
import os

from sbx import assert_usage_error, code, policy_text, sandboxd, shipped_policy, weak_policy


def test_allow_host_refused_under_strict():
    """strict says `max_network none`: no command line widens it."""
    r = code("print(1)", policy=shipped_policy("strict"), opts=["--allow-host", "pypi.org"])
    assert_usage_error(r, "--allow-host under strict")
    assert "allows no network (max_network none)" in r.stderr, r.describe()


def test_allow_host_under_default_runs_with_the_proxy():
    """default permits `--allow-host` (max_network proxy), which turns the run's network to proxy."""
    r = code("import os; print(os.environ['HTTPS_PROXY'])", opts=["--allow-host", "pypi.org"])
    assert r.rc == 0 and r.stdout == "http://127.0.0.1:3128\n", r.describe()


def test_allow_host_bad_pattern_is_a_usage_error():
    for bad, why in [("a..b", "empty label"), ("*.com", "top-level domain"), ("pypi.org:0", "1-65535"),
                     ("x.*.org", "first label"), ("[::1", "without `]`")]:
        r = code("print(1)", opts=["--allow-host", bad])
        assert_usage_error(r, f"--allow-host {bad}")
        assert why in r.stderr, r.describe()


def test_allow_host_option_limit():
    opts = []
    for i in range(65):
        opts += ["--allow-host", f"h{i}.example"]
    r = code("print(1)", opts=opts)
    assert_usage_error(r, "65 --allow-host")
    assert "too many --allow-host options (at most 64)" in r.stderr, r.describe()


def test_network_proxy_policy_without_hosts_runs_and_refuses_every_request():
    path = weak_policy("network-proxy", "default.policy", r"network\s+none", "network proxy")
    r = code("import urllib.request\ntry: urllib.request.urlopen('http://pypi.org/')\n"
             "except Exception as e: print(e.code)", policy=path)
    assert r.rc == 0 and r.stdout == "403\n", r.describe()


def test_default_network_is_none_in_every_shipped_policy():
    for name in ("default", "ci", "strict"):
        r = sandboxd("policy", "show", shipped_policy(name))
        assert r.rc == 0, r.describe()
        assert "\nnetwork            none\n" in r.stdout, r.describe()
    assert "\nmax_network        none\n" in sandboxd("policy", "show", shipped_policy("strict")).stdout


def test_policy_show_prints_the_allowlist_with_reasons():
    path = weak_policy("allow-hosts", "default.policy", r"max_network\s+proxy",
                       "max_network proxy\nallow_host PyPI.org   # the package index\n"
                       "allow_host *.pythonhosted.org\nallow_host [::1]:8080 # a test server")
    r = sandboxd("policy", "show", path)
    assert r.rc == 0, r.describe()
    assert ("allow_host pypi.org:443   # the package index\nallow_host *.pythonhosted.org:443\n"
            "allow_host [::1]:8080   # a test server\n") in r.stdout, r.describe()


def test_policy_check_names_the_bad_allow_host_line():
    path = weak_policy("bad-allow-host", "default.policy", r"max_network\s+proxy",
                       "max_network proxy\nallow_host foo.*.org")
    line = policy_text("default.policy").split("\n").index(
        next(l for l in policy_text("default.policy").split("\n") if l.startswith("max_network"))) + 2
    r = sandboxd("policy", "check", path)
    assert_usage_error(r, "bad allow_host")
    assert f"{os.path.basename(path)}:{line}: `allow_host`: `foo.*.org`: `*` may only be" in r.stderr, r.describe()


def test_mcp_allow_host_refused_at_startup():
    r = sandboxd("mcp", "--policy", shipped_policy("strict"), "--allow-host", "pypi.org", input=b"")
    assert_usage_error(r, "mcp --allow-host under strict")
    assert "max_network none" in r.stderr, r.describe()
    r = sandboxd("mcp", "--allow-host", "pypi.org", input=b"")
    assert r.rc == 0, r.describe()
