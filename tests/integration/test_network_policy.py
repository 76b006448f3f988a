"""The foundation of opt-in egress (#17): `network`, `max_network` and `allow_host` in policies,
`--allow-host` on exec and mcp. Until the egress proxy exists no sandbox gets more than loopback:
asking for `network proxy` is refused before anything runs, with one documented line."""
import os

from sbx import assert_usage_error, code, policy_text, sandboxd, shipped_policy, weak_policy

NOT_BUILT = "the egress proxy is not built yet"


def test_allow_host_refused_under_strict():
    """strict says `max_network none`: no command line widens it."""
    r = code("print(1)", policy=shipped_policy("strict"), opts=["--allow-host", "pypi.org"])
    assert_usage_error(r, "--allow-host under strict")
    assert "allows no network (max_network none)" in r.stderr, r.describe()


def test_allow_host_under_default_is_refused_at_run_time():
    """default permits `--allow-host` (max_network proxy), which asks for the proxy: refused, not
    run without it."""
    r = code("open('/workspace/ran', 'w'); print('ran')", opts=["--allow-host", "pypi.org"])
    assert_usage_error(r, "--allow-host under default")
    assert NOT_BUILT in r.stderr, r.describe()


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


def test_network_proxy_policy_refused_at_run_time():
    path = weak_policy("network-proxy", "default.policy", r"network\s+none", "network proxy")
    r = code("print('ran')", policy=path)
    assert_usage_error(r, "network proxy")
    assert f"policy `default`: network proxy: {NOT_BUILT}" in r.stderr, r.describe()


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
    assert_usage_error(r, "mcp --allow-host under default")
    assert NOT_BUILT in r.stderr, r.describe()
