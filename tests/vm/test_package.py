"""The package on a clean machine (issue #15 item 7): a fresh Debian tree (mmdebstrap minbase of
the host's release, cached under build/ by tests/vm/debian-root) booted in the test VM as a pure
cgroup v2 guest with no network (tests/vm/run --root). In it (tests/vm/package-check), the CI
action's step (scripts/github-action/action.yml, its script setup-sandboxd) runs `apt-get
install` of the .deb, which
must resolve every Depends from the archive's lists (the .debs it needs were downloaded on the
host by the same resolution; the guest cannot fetch anything else) and imports the built OCI
image into the store; then `sandboxd doctor`, `sandboxd exec -c 'print(6*7)'` and an MCP session
work as root and as a new ordinary user, and `apt-get purge` leaves behind only what the docs
say it keeps.

Needs root (mmdebstrap, the tree's ownership), the .deb (make deb), rootfs/python-3.14-slim.oci
(make rootfs) and a VM that starts; skips with the reason otherwise, and fails instead when
CI=true. The archive is needed once per release and once per change of the .deb's Depends.
"""
import glob
import os
import re
import shlex
import subprocess
import time

import pytest
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
SANDBOXD = os.path.abspath(os.environ.get("SANDBOXD") or os.path.join(REPO, "build/sandboxd"))
CACHE = os.environ.get("SANDBOXD_VM_DEBIAN_CACHE") or os.path.join(os.path.dirname(SANDBOXD), "vm-debian")
ACTION_DIR = os.path.join(REPO, "scripts/github-action")
USER = "alice"  # package-check's new user
# What purging keeps, as sandboxd(1) FILES says: the audit log, and what sandboxd wrote in a
# user's home, which is the user's: the audit log and the seccomp filter cache.
KEPT = ("/var/log/sandboxd", f"/home/{USER}/.local/state/sandboxd", f"/home/{USER}/.cache/sandboxd")
KEPT_PARENTS = (f"/home/{USER}/.local", f"/home/{USER}/.local/state", f"/home/{USER}/.cache")


def unavailable(why):
    (pytest.fail if CI else pytest.skip)(("CI=true and " if CI else "") + why)


def host_env():
    # The guest gets every SANDBOXD_* of tests/vm/run's environment: none may steer the installed
    # binary, which must find its layout alone.
    return {k: v for k, v in os.environ.items() if not k.startswith("SANDBOXD_")}


def action_step(path, inputs):
    """The action's one step as a bash script, as GitHub would run it: ${{ inputs.X }} in its env
    replaced by INPUTS or the input's default, GITHUB_ACTION_PATH set, then its run line."""
    a = yaml.safe_load(open(os.path.join(ACTION_DIR, "action.yml")))
    values = {k: str(v.get("default", "")) for k, v in a["inputs"].items()}
    values.update(inputs)
    (st,) = a["runs"]["steps"]
    assert st["shell"] == "bash"
    env = {k: re.sub(r"\$\{\{ inputs\.([a-z0-9-]+) \}\}", lambda m: values[m.group(1)], v) for k, v in st["env"].items()}
    lines = [f"export GITHUB_ACTION_PATH={shlex.quote(ACTION_DIR)}"]
    lines += [f"export {k}={shlex.quote(v)}" for k, v in env.items()]
    with open(path, "w") as f:
        f.write("\n".join(lines + [st["run"], ""]))
    return path


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    if os.environ.get("SANDBOXD_SKIP_VM") == "1" and not CI:
        pytest.skip("SANDBOXD_SKIP_VM=1")
    if os.geteuid() != 0:
        unavailable("not root: mmdebstrap and the guest tree's ownership need it")
    deb = os.environ.get("SANDBOXD_DEB") or next(
        iter(sorted(glob.glob(os.path.join(os.path.dirname(SANDBOXD), "sandboxd_*.deb")))), "")
    if not os.path.isfile(deb):
        unavailable("no .deb beside %s: run make deb" % SANDBOXD)
    rootfs = os.environ.get("SANDBOXD_ROOTFS") or os.path.join(REPO, "rootfs/python-3.14-slim")
    oci = os.path.realpath(rootfs + ".oci")
    if not os.path.isfile(os.path.join(oci, "index.json")):
        unavailable(f"no OCI image {rootfs}.oci: run make rootfs")
    probe = subprocess.run([os.path.join(HERE, "run"), "--probe"], capture_output=True, text=True, timeout=120,
                           env=host_env())
    if probe.returncode != 0:
        unavailable("the VM cannot start here: " + (probe.stderr.strip().splitlines() or ["?"])[-1])

    t0 = time.monotonic()
    prep = subprocess.run([os.path.join(HERE, "debian-root"), CACHE, deb], capture_output=True, text=True,
                          timeout=1800)
    assert prep.returncode == 0, prep.stderr
    where = dict(ln.split("=", 1) for ln in prep.stdout.splitlines() if "=" in ln)
    t1 = time.monotonic()
    deb = os.path.realpath(deb)
    check = os.path.join(HERE, "package-check")
    step_sh = action_step(str(tmp_path_factory.mktemp("action") / "step.sh"), {"deb": deb, "rootfs": oci})
    shares = [deb, oci, where["APT"], ACTION_DIR, check, step_sh]
    args = [os.path.join(HERE, "run"), "--timeout", "900", "--cgroup", "/", "--root", where["ROOT"]]
    for s in shares:
        args += ["--share", s]
    p = subprocess.run(args + ["--", check, deb, where["APT"], step_sh], capture_output=True, text=True,
                       timeout=960, env=host_env())
    t2 = time.monotonic()
    print(f"package VM: prepare {t1 - t0:.1f} s, VM {t2 - t1:.1f} s")
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    steps = {m.group(1): (m.group(2), m.group(3) or "")
             for m in re.finditer(r"^@@STEP (\S+) (ok|fail)(?: (.*))?@@$", p.stdout, re.M)}

    def files(tag):
        m = re.search(rf"^@@FILES-{tag}@@\n(.*?)^@@FILES-END@@$", p.stdout, re.M | re.S)
        return m and m.group(1).splitlines()

    return {"apt": where["APT"], "steps": steps, "before": files("BEFORE"), "after": files("AFTER"), "out": p.stdout, "err": p.stderr}


def step(run, name):
    got = run["steps"].get(name)
    assert got is not None, f"step {name} did not run:\n" + run["out"][-3000:] + run["err"][-2000:]
    assert got[0] == "ok", f"{name}: {got[1]}"


def test_install_resolves_dependencies_from_the_archive(run):
    step(run, "setup")
    step(run, "install")
    # apt installed the package and exactly what the host resolved from the archive (the
    # .debs it could find in its cache), among them libraries the clean machine did not have.
    m = re.search(r"^@@NEW-PACKAGES (.*)@@$", run["out"], re.M)
    assert m, run["out"][-3000:]
    resolved = {os.path.basename(d).split("_")[0] for d in glob.glob(os.path.join(run["apt"], "archives/*.deb"))}
    assert set(m.group(1).split()) == resolved | {"sandboxd"}
    # Every library is linked shared (tests/deb/test_deb.py); libmnl is one a clean machine lacks
    # (libseccomp2 and libcap-ng0 it has already).
    assert "libmnl0" in resolved and resolved & {"libarchive13", "libarchive13t64"}, resolved


def test_installed_version_is_the_debs(run):
    step(run, "version")


def test_oci_import_fills_the_store(run):
    step(run, "store")


@pytest.mark.parametrize("who", ["root", USER])
@pytest.mark.parametrize("what", ["doctor", "exec", "mcp"])
def test_works_as(run, what, who):
    step(run, f"{what}-{who}")


def test_without_a_delegated_cgroup_policy_ci_runs(run):
    """A CI runner gives its job no delegated cgroup: the default refuses (exit 125, one line),
    `--policy ci`, which the example jobs of sandboxd(1) use, runs on rlimits."""
    step(run, f"ci-policy-{USER}")


def test_purge_leaves_only_what_the_docs_say(run):
    step(run, "purge")
    before, after = set(run["before"] or []), set(run["after"] or [])
    assert before and after, "no file lists"
    path = lambda ln: ln.split(" ", 3)[3]  # noqa: E731 (type mode owner path)
    added = sorted(ln for ln in after - before
                   if not path(ln).startswith(tuple(k + "/" for k in KEPT)) and path(ln) not in KEPT + KEPT_PARENTS)
    removed = sorted(before - after)
    assert not added, "left behind by apt-get purge:\n" + "\n".join(added[:50])
    assert not removed, "removed or changed by the package:\n" + "\n".join(removed[:50])
