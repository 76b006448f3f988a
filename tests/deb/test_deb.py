"""The Debian package `make deb` built: lintian finds no error, it holds what an installed user
needs, and its Depends come from the binary itself (plus the libarchive it dlopens). Run by
tests/run (--only deb) after `make deb`; SANDBOXD_DEB names the package, else the one beside
SANDBOXD. The package's files at work: tests/integration/test_installed.py."""
import glob
import os
import re
import shutil
import subprocess

import pytest

SANDBOXD = os.path.abspath(os.environ.get("SANDBOXD") or "build/sandboxd")
CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def need(tool):
    if not shutil.which(tool):
        if CI:
            pytest.fail(f"CI=true and {tool} is not installed (scripts/install-deps)")
        pytest.skip(f"{tool} is not installed (scripts/install-deps)")


@pytest.fixture(scope="module")
def deb():
    path = os.environ.get("SANDBOXD_DEB") or next(
        iter(sorted(glob.glob(os.path.join(os.path.dirname(SANDBOXD), "sandboxd_*.deb")))), "")
    if not os.path.isfile(path):
        (pytest.fail if CI else pytest.skip)("no .deb: run make deb")
    return path


def field(deb, name):
    return subprocess.run(["dpkg-deb", "-f", deb, name], capture_output=True, text=True, check=True).stdout.strip()


def test_lintian_finds_no_error(deb):
    need("lintian")
    r = subprocess.run(["lintian", "--info", "--display-info", deb], capture_output=True, text=True, timeout=300)
    tags = [ln for ln in r.stdout.splitlines() if re.match(r"^[EWIXP]: ", ln)]
    errors = [t for t in tags if t.startswith("E: ")]
    assert r.returncode == 0 and not errors, "\n".join(tags) + r.stderr
    # Warnings are not errors, but none is expected today: say which appeared.
    print("\n".join(tags) or "lintian: no tags")


def test_name_version_and_architecture(deb):
    version = re.search(r'SANDBOXD_VERSION "([^"]+)"',
                        open(os.path.join(os.path.dirname(__file__), "../../src/base/version.h")).read()).group(1)
    arch = subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True).stdout.strip()
    assert os.path.basename(deb) == f"sandboxd_{version}_{arch}.deb"
    assert field(deb, "Version") == version and field(deb, "Architecture") == arch


def test_holds_what_an_installed_user_needs(deb):
    out = subprocess.run(["dpkg-deb", "-c", deb], capture_output=True, text=True, check=True).stdout
    entries = {ln.split()[-1].lstrip(".").rstrip("/"): ln.split()[0] for ln in out.splitlines()}
    for want, mode in (("/usr/bin/sandboxd", "-rwxr-xr-x"),
                       ("/usr/share/man/man1/sandboxd.1.gz", "-rw-r--r--"),
                       ("/usr/share/man/man5/sandboxd.policy.5.gz", "-rw-r--r--"),
                       ("/usr/share/man/man7/sandboxd-mcp.7.gz", "-rw-r--r--"),
                       ("/usr/share/sandboxd/policy/default.policy", "-rw-r--r--"),
                       ("/usr/share/sandboxd/policy/syscalls.inc", "-rw-r--r--"),
                       ("/usr/share/sandboxd/python/mcp/__init__.py", "-rw-r--r--"),
                       ("/usr/libexec/sandboxd/build-rootfs", "-rwxr-xr-x"),
                       ("/usr/libexec/sandboxd/oci-pack", "-rwxr-xr-x"),
                       ("/etc/apparmor.d/sandboxd", "-rw-r--r--"),
                       ("/usr/share/doc/sandboxd/copyright", "-rw-r--r--"),
                       ("/var/lib/sandboxd/rootfs", "drwxr-xr-x")):
        assert entries.get(want) == mode, (want, entries.get(want))
    # Every shipped policy, and the store empty.
    shipped = sorted(os.path.basename(p) for p in glob.glob(os.path.join(os.path.dirname(__file__), "../../policy/*.policy")))
    assert sorted(os.path.basename(e) for e in entries if e.startswith("/usr/share/sandboxd/policy/")
                  and e.endswith(".policy")) == shipped
    assert [e for e in entries if e.startswith("/var/lib/sandboxd/rootfs/")] == []
    assert not [e for e in entries if "__pycache__" in e]
    assert all(ln.split()[1] == "root/root" for ln in out.splitlines())


def test_depends_come_from_the_binary_and_its_dlopen(deb):
    need("objdump")
    depends = [d.strip() for d in field(deb, "Depends").split(",")]
    names = {alt.split()[0] for d in depends for alt in d.split("|")}
    # Every library the ELF header names is provided by a package that Depends names.
    needed = re.findall(r"NEEDED\s+(\S+)", subprocess.run(["objdump", "-p", SANDBOXD], capture_output=True,
                                                          text=True, check=True).stdout)
    assert needed
    for soname in needed:
        owner = subprocess.run(["dpkg", "-S", f"*/{soname}"], capture_output=True, text=True)
        pkgs = {ln.split(":")[0] for ln in owner.stdout.splitlines()}
        assert pkgs & names, (soname, pkgs, depends)
    # The sonames image_layer.c and mcp_http_daemon.c dlopen, and the package that holds each (t64 or not)
    # as an alternative.
    for name in ("libarchive", "libmicrohttpd"):
        dl = re.findall(name.encode() + rb"\.so\.\d+", open(SANDBOXD, "rb").read())
        assert dl, f"the binary no longer names {name}.so.N"
        owner = subprocess.run(["dpkg", "-S", "*/" + dl[0].decode()], capture_output=True, text=True)
        have = {ln.split(":")[0] for ln in owner.stdout.splitlines()}
        lib = [d for d in depends if name in d]
        assert len(lib) == 1 and have <= {a.split()[0] for a in lib[0].split("|")}, (lib, have)
    recommends = [r.strip().split()[0] for r in field(deb, "Recommends").split(",")]
    assert "skopeo" in recommends and "mmdebstrap" in recommends


def test_links_its_libraries_shared_so_security_updates_reach_it(deb, tmp_path):
    # The package's binary links libseccomp, libcap-ng, yajl, libmd and libmnl shared and Depends
    # on their packages (dpkg-shlibdeps), so a fix Debian ships for one reaches an installed
    # sandboxd without a rebuild; nothing is built in, so no Built-Using (issue 34, item 11).
    need("objdump")
    subprocess.run(["dpkg-deb", "-x", deb, str(tmp_path)], check=True)
    needed = re.findall(r"NEEDED\s+(\S+)", subprocess.run(["objdump", "-p", str(tmp_path / "usr/bin/sandboxd")],
                                                          capture_output=True, text=True, check=True).stdout)
    depends = {alt.split()[0] for d in field(deb, "Depends").split(",") for alt in d.split("|") if alt.strip()}
    for lib in ("libseccomp", "libcap-ng", "libyajl", "libmd", "libmnl"):
        sonames = [n for n in needed if n.startswith(lib + ".so.")]
        assert len(sonames) == 1, (lib, needed)
        owner = subprocess.run(["dpkg", "-S", f"*/{sonames[0]}"], capture_output=True, text=True)
        assert {ln.split(":")[0] for ln in owner.stdout.splitlines()} & depends, (sonames[0], owner.stdout, depends)
    assert "libseccomp2" in depends, depends
    assert field(deb, "Built-Using") == ""


def test_build_deb_refuses_a_static_build(tmp_path):
    # STATIC_LIBS=1 stays for who builds it, but is never packaged: `make STATIC_LIBS=1 deb` stops
    # with one line from build-deb and leaves no package.
    need("objdump")
    repo = os.path.abspath(os.path.join(os.path.dirname(__file__), "../.."))
    static = tmp_path / "build"
    r = subprocess.run(["make", "-s", "-C", repo, f"BUILD={static}", "STATIC_LIBS=1", "deb"],
                       capture_output=True, text=True, timeout=1200)
    needed = subprocess.run(["objdump", "-p", str(static / "sandboxd")], capture_output=True, text=True).stdout
    assert "libseccomp.so" not in needed, "STATIC_LIBS=1 no longer links libseccomp from its archive"
    said = [ln for ln in r.stderr.splitlines() if ln.startswith("build-deb: ")]
    assert r.returncode != 0 and not glob.glob(str(static / "*.deb")), r.stderr
    assert len(said) == 1 and "STATIC_LIBS=1" in said[0] and "libseccomp.so" in said[0], r.stderr


def test_apparmor_profile_is_for_the_installed_binary_only(deb, tmp_path):
    subprocess.run(["dpkg-deb", "-x", deb, str(tmp_path)], check=True)
    text = (tmp_path / "etc/apparmor.d/sandboxd").read_text()
    rules = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith("#")]
    attach = [r for r in rules if r.startswith("profile ")]
    assert attach == ["profile sandboxd /usr/bin/sandboxd flags=(unconfined) {"], attach
    assert "userns," in rules
    assert not [r for r in rules if "/usr/local" in r]
    conffiles = subprocess.run(["dpkg-deb", "--ctrl-tarfile", deb], capture_output=True, check=True).stdout
    assert b"./conffiles" in conffiles
    ctrl = tmp_path / "ctrl"
    subprocess.run(["dpkg-deb", "-e", deb, str(ctrl)], check=True)
    assert (ctrl / "conffiles").read_text() == "/etc/apparmor.d/sandboxd\n"
    for script in ("postinst", "postrm"):
        assert subprocess.run(["sh", "-n", str(ctrl / script)]).returncode == 0
    if shutil.which("apparmor_parser"):
        profile = tmp_path / "etc/apparmor.d/sandboxd"
        ver = subprocess.run(["apparmor_parser", "--version"], capture_output=True, text=True).stdout
        m = re.search(r"version (\d+)\.", ver)
        if m and int(m.group(1)) < 4:
            # Debian 12's parser (3.0) predates abi/4.0 and the userns rule, which Ubuntu 24.04's
            # (4.0) needs: the rest of the profile is parsed under abi/3.0 without that one rule.
            assert text.count("abi <abi/4.0>,") == 1 and rules.count("userns,") == 1
            older = tmp_path / "sandboxd-abi3"
            older.write_text(text.replace("abi <abi/4.0>,", "abi <abi/3.0>,").replace("userns,", ""))
            profile = older
        r = subprocess.run(["apparmor_parser", "-Q", "-K", str(profile)], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr


def test_states_the_license(deb, tmp_path):
    """The package says what the tree's LICENSE says: Apache-2.0 (issue #35 item 5)."""
    repo = os.path.join(os.path.dirname(__file__), "../..")
    with open(os.path.join(repo, "LICENSE")) as f:
        assert "Apache License" in f.read(400) and "Version 2.0" in open(os.path.join(repo, "LICENSE")).read(400)
    subprocess.run(["dpkg-deb", "-x", deb, str(tmp_path)], check=True)
    text = (tmp_path / "usr/share/doc/sandboxd/copyright").read_text()
    assert "\nLicense: Apache-2.0\n" in text, text
    assert "no-license" not in text, text


def test_depends_holds_the_public_suffix_list(deb):
    # src/policy/psl.c reads the list at run time (allow_host wildcards): its package is a Depends.
    depends = [d.strip() for d in field(deb, "Depends").split(",")]
    path = re.findall(rb"/usr/share/publicsuffix/[a-z_]+\.dat", open(SANDBOXD, "rb").read())
    assert path, "the binary no longer names the public suffix list"
    owner = subprocess.run(["dpkg", "-S", path[0].decode()], capture_output=True, text=True)
    pkgs = {ln.split(":")[0] for ln in owner.stdout.splitlines()}
    assert pkgs and pkgs <= set(depends), (path[0], pkgs, depends)
