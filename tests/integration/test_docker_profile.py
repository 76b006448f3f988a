"""The shipped seccomp profile for the outer container (scripts/docker/seccomp.json): Docker's
default plus exactly what sandboxd calls, and nothing Docker denies for a reason sandboxd does not
share. Fast (reads files); tests/docker runs it under a real dockerd."""
import glob
import importlib.machinery
import importlib.util
import json
import os
import re

import sbx

DOCKER = os.path.join(sbx.REPO, "scripts", "docker")
_loader = importlib.machinery.SourceFileLoader("make_seccomp_profile", os.path.join(DOCKER, "make-seccomp-profile"))
_spec = importlib.util.spec_from_loader(_loader.name, _loader)
gen = importlib.util.module_from_spec(_spec)
_loader.exec_module(gen)

# Calls sandboxd makes that Docker's profile does not allow, and that the shipped one leaves out
# on purpose (make-seccomp-profile says why): without them sandboxd keeps no filter cache.
LEFT_OUT = {"keyctl", "add_key"}


def profile():
    with open(os.path.join(DOCKER, "seccomp.json")) as f:
        return json.load(f)


def names(rule):
    return set(rule.get("names") or [rule["name"]])


def unconditional(rule):
    return rule["action"] == "SCMP_ACT_ALLOW" and not any(rule.get(k) for k in ("args", "includes", "excludes"))


def test_is_dockers_default_plus_one_rule():
    p = profile()
    assert p["defaultAction"] == "SCMP_ACT_ERRNO" and p.get("defaultErrnoRet") == 1
    ours = [r for r in p["syscalls"] if r.get("comment") == gen.COMMENT]
    assert len(ours) == 1 and names(ours[0]) == set(gen.SANDBOXD) and unconditional(ours[0]), ours
    # Docker's clone3 ENOSYS and flag-masked clone are replaced, not left to conflict.
    for r in p["syscalls"]:
        if r is not ours[0] and names(r) & {"clone", "clone3"}:
            assert r["action"] == "SCMP_ACT_ALLOW" and r.get("includes", {}).get("caps") == ["CAP_SYS_ADMIN"], r


def test_grants_nothing_docker_denies_for_other_reasons():
    """Keyrings (not namespaced), bpf, perf, ptrace, modules, reboot, time stay as Docker has them."""
    guarded = {"keyctl", "add_key", "request_key", "bpf", "perf_event_open", "ptrace", "init_module",
               "finit_module", "reboot", "settimeofday", "clock_settime", "kexec_load", "open_by_handle_at",
               "fsopen", "fsmount", "fspick", "userfaultfd", "iopl", "ioperm", "swapon", "acct"}
    for r in profile()["syscalls"]:
        if unconditional(r):
            assert not names(r) & guarded, (names(r) & guarded, r.get("comment"))


def sandboxd_syscalls():
    """Every syscall the C sources make by number (SYS_x) or through the libc wrappers of the
    namespace, mount and identity calls."""
    wrappers = ("mount", "umount2", "pivot_root", "unshare", "setns", "sethostname", "setdomainname", "chroot",
                "mount_setattr", "open_tree", "move_mount", "fsopen", "fsmount", "fsconfig")
    found = set()
    for path in glob.glob(os.path.join(sbx.REPO, "src", "*", "*.c")):  # each layer's; not src/inside
        if os.path.basename(os.path.dirname(path)) == "inside":
            continue
        with open(path) as f:
            text = re.sub(r"/\*.*?\*/", "", f.read(), flags=re.S)
        found |= set(re.findall(r"\bSYS_(\w+)", text))
        found |= {w for w in wrappers if re.search(rf"(?<![\w.>]){w}\(", text)}
    return found


def test_allows_every_call_sandboxd_makes():
    p = profile()
    allowed = set().union(*(names(r) for r in p["syscalls"] if unconditional(r)))
    used = sandboxd_syscalls()
    assert {"clone3", "pivot_root", "mount_setattr", "keyctl"} <= used, used  # the scan works
    missing = used - allowed - LEFT_OUT
    assert not missing, f"sandboxd calls {sorted(missing)}, which the container profile denies"
