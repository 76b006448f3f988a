"""Isolation properties, judged from facts the probes report from inside the sandbox.

Each property is a function check_X(run) -> list of violations (strings). `run` is a Runner bound
to one policy. test_X asserts no violations under the shipped policy; test_weak_policy_is_caught
runs the same check under a copy of the policy with exactly one line weakened and asserts that it
DOES report violations, which shows the check can see the hole it guards against.

A check raises ProbeError (a test failure, never a "pass") when the probe did not run at all.
None of these tests skip when CI=true, but for a check of what the host's kernel itself refuses
(badarch_int80 without IA32 emulation: sbx.NotApplicable, decided by running the probe unconfined)."""
import os
import re
import signal
import subprocess
import sys

import pytest

import sbx
from sbx import MiB, ProbeError

pytestmark = pytest.mark.security


class Runner:
    def __init__(self, policy=None):
        self.policy = policy
        self._cache = {}

    def probe(self, name, *args, **kw):
        key = (name, args, tuple(sorted(kw.items())))
        if key not in self._cache:
            self._cache[key] = sbx.probe(name, *args, policy=self.policy, **kw)
        return self._cache[key]

    def raw(self, target, *args, **kw):
        return sbx.run(target, *args, policy=self.policy, **kw)

    def facts(self):
        return self.probe("facts", sbx.REPO, sbx.SANDBOXD, sbx.WORK, "/work", "/home/sbxtest")

    def syscalls(self):
        return self.probe("syscalls")


# ---------------------------------------------------------------- identity and privileges


def check_identity(run):
    f = run.facts()
    v = []
    if f["ids"].get("resuid") != [1000] * 3:
        v.append(f"uid is {f['ids'].get('resuid')}, want 1000 everywhere")
    if f["ids"].get("resgid") != [1000] * 3:
        v.append(f"gid is {f['ids'].get('resgid')}, want 1000 everywhere")
    if set(f["ids"].get("groups", [])) - {1000}:
        v.append(f"supplementary groups {f['ids']['groups']}")
    um, gm = f["uid_map"], f["gid_map"]
    one = lambda m: len(m) == 1 and isinstance(m[0], list) and len(m[0]) == 3 and m[0][0] == "1000" and m[0][2] == "1"
    if not (one(um) and one(gm) and sbx.is_host_id(int(um[0][1]), int(gm[0][1]))):
        v.append(f"uid_map {um}, gid_map {gm}: want 1000 mapped to one host id "
                 f"({'of host_id_range' if sbx.IS_ROOT else 'the invoking user'})")
    if any(m and m[1] == "0" for m in f["uid_map"] if isinstance(m, list)):
        v.append("host root is mapped into the sandbox")
    return v


def check_no_new_privs(run):
    st = run.facts()["status"]
    return [] if st.get("NoNewPrivs") == "1" else [f"NoNewPrivs is {st.get('NoNewPrivs')!r}"]


def check_capabilities(run):
    st = run.facts()["status"]
    return [f"{k} is {st.get(k)!r}" for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")
            if st.get(k) is None or int(st[k], 16) != 0]


def check_seccomp_on(run):
    st = run.facts()["status"]
    return [] if st.get("Seccomp") == "2" else [f"Seccomp is {st.get('Seccomp')!r}, want 2 (filter)"]


# ---------------------------------------------------------------- filesystem

# Where the code may write: its scratch tmpfs mounts. /proc is the procfs mount itself (its
# dangerous parts are masked or read-only, checked separately).
WRITABLE_OK = {"/tmp", "/workspace", "/dev/shm", "/run", "/proc"}
DEV_NODES = {"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"}


def check_readonly_root(run):
    f = run.facts()
    v = []
    ro = f["statvfs_ro"]
    for p in ("/", "/usr", "/etc"):
        if not isinstance(ro.get(p), dict) or not ro[p]["ro"]:
            v.append(f"{p} is not mounted read-only ({ro.get(p)})")
    for p in ("/",):
        if isinstance(ro.get(p), dict) and not (ro[p]["nosuid"] and ro[p]["nodev"]):
            v.append(f"{p} lacks nosuid/nodev ({ro[p]})")
    w = f["writable"]
    for p in ("/", "/usr", "/usr/bin", "/etc", "/bin", "/lib", "/var", "/var/tmp", "/root", "/home",
              "/opt", "/dev", "/sys"):
        if w.get(p) == "yes":
            v.append(f"could create a file in {p}")
    for p in ("/etc/passwd", "/usr/bin/python3"):
        if w.get(p) == "yes":
            v.append(f"could open {p} for writing")
    for m in f["mounts"]:
        t = m["target"]
        if "ro" in m["opts"] or t in WRITABLE_OK or t in DEV_NODES:
            continue
        if t.startswith("/proc/") and m["root"] in ("/null", "/dev/null"):
            continue  # a mask: /dev/null bound over a /proc file
        v.append(f"mount {t} ({m['fstype']} {m['source']}) is writable: {','.join(m['opts'])}")
    return v


def check_scratch_mounts(run):
    """The writable places are tmpfs (fresh each run) and carry nosuid,nodev."""
    f = run.facts()
    v = []
    mounts = {m["target"]: m for m in f["mounts"]}
    for t in ("/tmp", "/workspace"):
        m = mounts.get(t)
        if not m:
            v.append(f"{t} is not a mount")
            continue
        if m["fstype"] != "tmpfs":
            v.append(f"{t} is {m['fstype']}, want tmpfs")
        if not {"nosuid", "nodev"} <= set(m["opts"]):
            v.append(f"{t} lacks nosuid/nodev: {m['opts']}")
        if f["writable"].get(t) != "yes":
            v.append(f"{t} is not writable: {f['writable'].get(t)}")
    return v


PROC_RO = ["/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs"]


# Host facts the code has no use for: the host kernel's boot line and the id of this boot.
HOST_FACTS = ["/proc/cmdline", "/proc/sys/kernel/random/boot_id"]


def check_proc_masking(run):
    f = run.facts()
    v = [f"the probe did not look at {p}" for p in HOST_FACTS if p not in f["proc_mask"]]
    for p, e in f["proc_mask"].items():
        if not e.get("exists"):
            continue
        if e.get("dir"):
            if e.get("entries", 1) != 0:
                v.append(f"{p} is not masked: directory with {e.get('entries')} entries ({e})")
        elif e.get("bytes") != 0:
            v.append(f"{p} is not masked: {e}")
    for p in PROC_RO:
        st = f["statvfs_ro"].get(p)
        if isinstance(st, dict) and not st["ro"]:
            v.append(f"{p} is writable (not mounted read-only)")
    for p in ("/proc/sys/kernel/hostname", "/proc/sys/vm/drop_caches", "/proc/sysrq-trigger"):
        if f["writable"].get(p) == "yes":
            v.append(f"could open {p} for writing")
    return v


def check_dev_and_sys(run):
    f = run.facts()
    v = []
    required = {"null": [1, 3], "zero": [1, 5], "full": [1, 7], "random": [1, 8], "urandom": [1, 9]}
    optional = {"shm", "fd", "stdin", "stdout", "stderr", "ptmx", "mqueue", "core"}
    dev = f["dev"]
    for n, mm in required.items():
        if dev.get(n) != ["chr"] + mm:
            v.append(f"/dev/{n} is {dev.get(n)}, want char {mm}")
    extra = set(dev) - set(required) - optional
    if extra:
        v.append(f"unexpected entries in /dev: {sorted(extra)}")
    if "pts" in dev:
        v.append("/dev/pts is present")
    if "ptmx" in dev and dev["ptmx"][0] == "chr":
        v.append("/dev/ptmx is a usable device node")
    works = f["dev_works"]
    if works.get("null_write") != 10 or works.get("zero") is not True or works.get("urandom") != 16 \
            or works.get("full") != "ENOSPC":
        v.append(f"device nodes misbehave: {works}")
    s = f["sys"]
    if s.get("exists"):
        if s.get("entries"):
            st = f["statvfs_ro"].get("/sys")
            if not (isinstance(st, dict) and st["ro"]):
                v.append(f"/sys has content and is writable: {s}")
            if s.get("/sys/fs/cgroup") or s.get("/sys/kernel"):
                v.append(f"/sys exposes host kernel state: {s}")
        if f["writable"].get("/sys") == "yes" or f["writable"].get("/sys/kernel/uevent_helper") == "yes":
            v.append("/sys is writable")
    return v


def check_host_invisible(run):
    """No host paths, processes, descriptors or environment leak in."""
    f = run.facts()
    v = []
    for p, seen in f["host_paths"].items():
        if seen and p not in ("/home/sbxtest",) and not p.startswith(("/workspace", "/tmp")):
            v.append(f"host path {p} is visible inside")
    if f["host_paths"].get("/home/sbxtest"):
        v.append("host /home/sbxtest is visible inside")
    fds = f["fds"]
    if "error" in fds or sorted(fds) != ["0", "1", "2"]:
        v.append(f"open descriptors besides 0,1,2: {fds}")
    return v


def check_pid_namespace(run):
    f = run.facts()
    p = f["processes"]
    v = []
    if p["ppid"] != 1:
        v.append(f"python's parent is pid {p['ppid']}, want 1 (sandboxd's init)")
    info1 = p["info"].get("1", {})
    cmd1 = " ".join(info1.get("cmdline", []))
    if "python" in cmd1 or "python" in info1.get("comm", ""):
        v.append(f"pid 1 is python ({info1}); want sandboxd's init")
    others = set(p["pids"]) - {1, p["pid"]}
    if others:
        v.append(f"other processes visible: {[(q, p['info'].get(str(q))) for q in sorted(others)]}")
    return v


def check_network(run):
    f = run.facts()
    v = []
    ifs = f["interfaces"]
    if ifs.get("names") != ["lo"]:
        v.append(f"interfaces {ifs.get('names')}, want only lo")
    if not isinstance(ifs.get("flags", {}).get("lo"), int) or not ifs["flags"]["lo"] & 1:
        v.append(f"lo is not up: {ifs.get('flags')}")
    if f["routes"]:
        v.append(f"IPv4 routes: {f['routes']}")
    for k, res in f["outside_network"].items():
        if res not in ("ENETUNREACH", "EHOSTUNREACH", "ENETDOWN"):
            v.append(f"{k} to the outside: {res}")
    return v


def check_uts(run):
    h = run.facts()["hostname"]
    return [] if set(h.values()) == {"sandbox"} else [f"hostname {h}, want sandbox"]


def check_environment(run):
    env = run.facts()["env"]
    want = {"PATH": "/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/workspace",
            "LANG": "C.UTF-8", "TMPDIR": "/tmp", "PYTHONDONTWRITEBYTECODE": "1",
            "NODE_OPTIONS": "--max-old-space-size=512"}  # the policy's memory limit (test_node.py)
    return [] if env == want else [f"environment {env}, want {want}"]


def check_rlimits(run):
    r = run.facts()["rlimits"]
    v = []
    want = {"CORE": 0, "NOFILE": 1024, "FSIZE": 128 * MiB}
    # Memory and processes are rlimits only when no cgroup enforces them exactly; with a cgroup
    # an address-space limit would fail allocations the memory limit allows (sandboxd(1)).
    if sbx.enforcement(run.policy) == "degraded":
        want.update({"AS": 512 * MiB, "NPROC": 128})
    for k, n in want.items():
        soft, hard = r[k]
        if soft != n:
            v.append(f"RLIMIT_{k} soft limit is {soft}, want {n}")
        if hard != soft and k != "CORE":
            v.append(f"RLIMIT_{k} hard limit {hard} != soft {soft}: the code can raise its own limit")
    return v


# ---------------------------------------------------------------- seccomp


def _errno_lines():
    """syscall -> line of every unconditional `errno EPERM` rule in the included rules file."""
    out = {}
    if True:
        for line in sbx.policy_text("syscalls").splitlines():
            words = line.split("#")[0].split()
            if words[:2] == ["errno", "EPERM"] and "when" not in words:
                for w in words[2:]:
                    out[w] = line.strip()
    return out


DENIED = _errno_lines()
UNLISTED = ["modify_ldt", "getcpu", "get_mempolicy", "set_mempolicy", "vmsplice", "seccomp", "pkey_alloc",
            "landlock_create_ruleset", "memfd_secret", "mbind", "sysfs", "ustat", "nr_1000"]


def _sc(run):
    s = run.syscalls()
    if s.get("getpid", {}).get("ret", -1) <= 0 or s.get("fork", {}).get("ret") != 7:
        raise ProbeError(sbx.Result([], 0, b"", b"", 0), f"basic syscalls do not work: {s.get('getpid')} {s.get('fork')}")
    return s


def _want(s, names, allowed):
    v = []
    for n in names:
        got = s.get(n)
        if got is None:
            v.append(f"{n}: the probe has no call for it (add it to tests/probes/syscalls.py)")
        elif got["errno"] not in allowed:
            v.append(f"{n} answered ret={got['ret']} errno={got['errno']}, want {'/'.join(allowed)}")
    return v


def check_denied_syscalls(run):
    return _want(_sc(run), sorted(DENIED), ["EPERM"])


def check_unknown_syscalls(run):
    return _want(_sc(run), UNLISTED, ["ENOSYS"])


def check_tty_ioctls(run):
    s = _sc(run)
    v = _want(s, ["ioctl_tiocsti", "ioctl_tiocsti_highbits", "ioctl_tiocsti_highbits2", "ioctl_tioclinux",
                  "ioctl_tioclinux_highbits"], ["EPERM"])
    if s["ioctl_fionread_devnull"]["errno"] != "ENOTTY":
        v.append(f"plain ioctl does not reach the kernel: {s['ioctl_fionread_devnull']}")
    return v


MKNOD_DENIED = [f"{c}_{k}" for c in ("mknod", "mknodat") for k in (
    "chr", "blk", "reg", "untyped", "sock", "dir", "fifo_chr", "chr_highbits", "chr_bit16")]


def check_mknod_fifo_only(run):
    """mknod and mknodat reach the kernel for a FIFO (ENOENT: the probe's path does not exist)
    and fail with EPERM for every other file type, devices first (policy: group files)."""
    s = _sc(run)
    return _want(s, ["mknod", "mknodat"], ["ENOENT"]) + _want(s, MKNOD_DENIED, ["EPERM"])


def check_clone_namespaces(run):
    s = _sc(run)
    v = _want(s, ["clone_newuser_fs", "clone_newcgroup_fs", "clone_newns", "clone_newnet", "clone_newuser_real"],
              ["ENOSYS", "EPERM"])
    v += _want(s, ["clone3"], ["ENOSYS"])
    v += _want(s, ["unshare_newuser"], ["EPERM"])
    return v


def check_socket_families(run):
    s = _sc(run)
    v = []
    for n in ("socket_unix", "socket_inet", "socket_inet6", "socketpair_unix"):
        if not isinstance(s[n]["ret"], int) or s[n]["ret"] < 0:
            v.append(f"{n} failed: {s[n]}")
    v += _want(s, ["socket_netlink", "socket_netlink_highbits", "socket_packet", "socket_alg", "socket_vsock",
                   "socketpair_inet"], ["ENOSYS"])
    return v


def check_badarch_x32(run):
    r = run.raw("badarch", "x32")
    if r.rc != 159 or b"SURVIVED" in r.out:
        return [f"x32 syscall: exit {r.rc} ({r.stdout.strip()!r}), want 159 (killed by SIGSYS)"]
    return []


def int80_refusal(rc, out):
    """What `badarch.py int80` run unconfined (exit status rc as subprocess gives it, stdout out)
    says of the kernel: None when it has the i386 ABI (the probe survived, so a sandbox must kill
    it), else why the sandboxed check cannot apply. Anything else raises: a probe that broke on
    the host must fail the test, never turn it into a skip."""
    if rc == 0 and b"SURVIVED int80" in out:
        return None
    if rc == -signal.SIGSEGV:
        return ("this kernel has no IA32 emulation: `int 0x80` is killed by SIGSEGV outside any sandbox "
                "too, before seccomp can see it")
    raise AssertionError(f"badarch.py int80 outside the sandbox: exit {rc} ({out!r}), want 0 (the kernel "
                         "has the i386 ABI) or SIGSEGV (it has none)")


_HOST_INT80 = []


def host_int80_refusal():
    """int80_refusal of the same probe run unconfined on the host (once per session)."""
    if not _HOST_INT80:
        p = subprocess.run([sys.executable, os.path.join(sbx.PROBES, "badarch.py"), "int80"],
                           stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
        _HOST_INT80.append(int80_refusal(p.returncode, p.stdout))
    return _HOST_INT80[0]


def check_badarch_int80(run):
    # Where the kernel itself refuses the ABI there is nothing for seccomp to stop (exit 139, not 159).
    reason = host_int80_refusal()
    sbx.need(reason is None, reason, security=False)
    r = run.raw("badarch", "int80")
    if r.rc != 159 or b"SURVIVED" in r.out:
        return [f"int80 syscall: exit {r.rc} ({r.stdout.strip()!r}), want 159 (killed by SIGSYS)"]
    return []


# ---------------------------------------------------------------- the tests

CHECKS = [check_identity, check_no_new_privs, check_capabilities, check_seccomp_on, check_readonly_root,
          check_scratch_mounts, check_proc_masking, check_dev_and_sys, check_host_invisible,
          check_pid_namespace, check_network, check_uts, check_environment, check_rlimits,
          check_denied_syscalls, check_unknown_syscalls, check_tty_ioctls, check_mknod_fifo_only,
          check_clone_namespaces,
          check_socket_families, check_badarch_x32, check_badarch_int80]


_SHIPPED = Runner()  # one set of probe runs under the shipped policy, shared by the tests below


@pytest.fixture
def default_run():
    return _SHIPPED


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__[len("check_"):])
def test_default_policy(check, default_run):
    violations = check(default_run)
    assert violations == [], "\n".join(violations)


_FIFOS = r"""
import errno, json, os, stat, subprocess
out = {}
os.mkfifo("/tmp/f1", 0o600)
out["os.mkfifo"] = stat.S_ISFIFO(os.stat("/tmp/f1").st_mode)
# A shell script's pipe by name: mkfifo(1), a writer in the background, a reader.
r = subprocess.run(["bash", "-c", "mkfifo /tmp/f2 && (echo through the fifo > /tmp/f2 &) && cat /tmp/f2"],
                   capture_output=True, text=True, timeout=20)
out["mkfifo"] = [r.returncode, r.stdout, r.stderr]
for name, mode in (("chr", stat.S_IFCHR), ("blk", stat.S_IFBLK), ("sock", stat.S_IFSOCK)):
    try:
        os.mknod("/tmp/node-" + name, mode | 0o600, os.makedev(1, 3))
        out[name] = "created"
    except OSError as e:
        out[name] = errno.errorcode[e.errno]
print(json.dumps(out))
"""


@pytest.mark.parametrize("name", ["default", "strict", "ci"])
def test_fifos_work_and_device_nodes_do_not(name):
    """mkfifo(1) and os.mkfifo make FIFOs that carry data; os.mknod of a character or block
    device (or a socket) still fails with EPERM, under every shipped policy."""
    r = sbx.code(_FIFOS, policy=sbx.shipped_policy(name))
    assert r.rc == 0, r.describe()
    assert r.json() == {"os.mkfifo": True, "mkfifo": [0, "through the fifo\n", ""],
                        "chr": "EPERM", "blk": "EPERM", "sock": "EPERM"}, r.describe()


@pytest.mark.parametrize("name", ["default", "strict", "ci"])
def test_shipped_policy_masks_proc(name):
    """Every shipped policy hides the masked /proc files, /proc/cmdline and boot_id among them."""
    violations = check_proc_masking(Runner(sbx.shipped_policy(name)))
    assert violations == [], "\n".join(violations)


def test_int80_probe_decides_from_the_unconfined_run():
    """The decision behind badarch_int80's skip, on real exits: a host that runs the probe is
    checked, one whose kernel kills `int 0x80` with SIGSEGV skips, and anything else fails."""
    assert int80_refusal(0, b"SURVIVED int80: returned 4242\n") is None
    segv = subprocess.run([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"])
    assert "no IA32 emulation" in int80_refusal(segv.returncode, b"")
    for rc, out in ((0, b""), (1, b"Traceback"), (-signal.SIGSYS, b""), (159, b"")):
        with pytest.raises(AssertionError):
            int80_refusal(rc, out)


class _FakeRun:
    def __init__(self, rc):
        self.rc, self.calls = rc, []

    def raw(self, target, *args, **kw):
        self.calls.append((target, args))
        return sbx.Result([target, *args], self.rc, b"", b"", 0.0)


def test_int80_check_runs_wherever_the_host_has_the_abi(monkeypatch):
    """Where the unconfined probe survives, the sandboxed one runs and must die of SIGSYS (no skip,
    no vacuous pass); where the kernel refuses the ABI, the check skips before running it."""
    monkeypatch.setattr(sys.modules[__name__], "_HOST_INT80", [None])
    run = _FakeRun(159)
    assert check_badarch_int80(run) == [] and run.calls == [("badarch", ("int80",))]
    assert "exit 139" in check_badarch_int80(_FakeRun(139))[0]
    monkeypatch.setattr(sys.modules[__name__], "_HOST_INT80", ["no IA32 emulation"])
    run = _FakeRun(159)
    with pytest.raises(sbx.NotApplicable, match="no IA32 emulation"):
        check_badarch_int80(run)
    assert run.calls == []


def test_probe_knows_every_denied_syscall():
    import importlib.util
    spec = importlib.util.spec_from_file_location("sc", os.path.join(sbx.PROBES, "syscalls.py"))
    with open(spec.origin) as f:
        text = f.read()
    missing = [n for n in DENIED if f'"{n}"' not in text]
    assert not missing, f"the policy denies {missing}; add discriminating calls to tests/probes/syscalls.py"


def _allow(line):
    return line.replace("errno EPERM", "allow", 1)


# (tag, file, line regex, replacement (str, None = delete, or callable on the old line), check)
WEAK = [
    ("no_new_privs", "default.policy", r"no_new_privs\s+yes\b.*", "no_new_privs no", check_no_new_privs),
    ("drop_capabilities", "default.policy", r"drop_capabilities\s+yes\b.*", "drop_capabilities no",
     check_capabilities),
    ("readonly_root", "default.policy", r"readonly_root\s+yes\b.*", "readonly_root no", check_readonly_root),
    ("mask_proc", "default.policy", r"mask_proc\s+yes\b.*", "mask_proc no", check_proc_masking),
    ("proc_mask_shortened", "default.policy", r"proc_mask\s+/proc/kcore\s.*", "proc_mask /proc/kcore /proc/sched_debug",
     check_proc_masking),
    ("proc_mask_host_facts", "default.policy", r"proc_mask\s+/proc/cmdline\s.*", None, check_proc_masking),
    ("proc_readonly_without_sys", "default.policy", r"proc_readonly\s.*",
     "proc_readonly /proc/sysrq-trigger /proc/irq /proc/bus /proc/fs", check_proc_masking),
    ("tiocsti", "syscalls", r"errno EPERM ioctl when arg1 == TIOCSTI\b.*", None, check_tty_ioctls),
    ("tioclinux", "syscalls", r"errno EPERM ioctl when arg1 == TIOCLINUX\b.*", None, check_tty_ioctls),
    ("mknod_untyped", "syscalls", r"errno EPERM mknod when arg1 & 0x1000 == 0\b.*", None, check_mknod_fifo_only),
    ("mknodat_chr", "syscalls", r"errno EPERM mknodat when arg2 & 0x2000 == 0x2000\b.*", None,
     check_mknod_fifo_only),
    ("clone_unconditional", "syscalls", r"allow clone when .*", "allow clone", check_clone_namespaces),
    ("clone3_allowed", "syscalls", r"errno ENOSYS clone3\b.*", "allow clone3", check_clone_namespaces),
    ("socket_unconditional", "syscalls", r"allow socket when .*", "allow socket", check_socket_families),
    ("socketpair_unconditional", "syscalls", r"allow socketpair when .*", "allow socketpair",
     check_socket_families),
    ("namespaces_mount", "syscalls", r"errno EPERM unshare setns .*", _allow, check_denied_syscalls),
    ("namespaces_newmount", "syscalls", r"errno EPERM fsopen .*", _allow, check_denied_syscalls),
    ("kernel_bpf_iouring", "syscalls", r"errno EPERM bpf .*", _allow, check_denied_syscalls),
    ("kernel_keys", "syscalls", r"errno EPERM keyctl .*", _allow, check_denied_syscalls),
    ("introspection", "syscalls", r"errno EPERM ptrace .*", _allow, check_denied_syscalls),
    ("host_modules_reboot", "syscalls", r"errno EPERM init_module .*", _allow, check_denied_syscalls),
    ("host_time_swap", "syscalls", r"errno EPERM swapon .*", _allow, check_denied_syscalls),
    ("host_names_io", "syscalls", r"errno EPERM sethostname .*", _allow, check_denied_syscalls),
    ("host_handles_nodes", "syscalls", r"errno EPERM open_by_handle_at .*", _allow, check_denied_syscalls),
    ("host_xattr", "syscalls", r"errno EPERM setxattr .*", _allow, check_denied_syscalls),
    ("unlisted_allowed", "syscalls", r"allow brk mmap .*", lambda l: l + " modify_ldt getcpu",
     check_unknown_syscalls),
]


# The weakenings the unprivileged floor undoes (sandboxd.policy(5), UNPRIVILEGED FLOOR): run by an
# ordinary user, the weakened line is not enforced, and the same check must find no hole.
FLOORED = {"no_new_privs", "drop_capabilities", "clone_unconditional", "clone3_allowed", "namespaces_mount",
           "namespaces_newmount"}


@pytest.mark.parametrize("tag,file,old,new,check", WEAK, ids=[w[0] for w in WEAK])
def test_weak_policy_is_caught(tag, file, old, new, check):
    path = sbx.weak_policy(tag, file, old, new)
    chk = sbx.sandboxd("policy", "check", path)
    assert chk.rc == 0, f"the weakened policy must itself be valid\n{chk.describe()}"
    # The same check passes on the shipped policy (else this proves nothing) ...
    assert check(_SHIPPED) == [], f"{check.__name__} fails on the shipped policy already"
    violations = check(Runner(path))
    if tag in FLOORED and not sbx.IS_ROOT:
        # ... and unprivileged the floor holds it (as root the same line shows the check sees it).
        assert violations == [], f"the unprivileged floor let {tag} ({new!r}) through: {violations}"
        return
    # ... and reports the hole on the weakened one.
    assert violations, f"{check.__name__} did not notice the weakened line ({tag}: {new!r})"


def _users_own_policy():
    """Issue 34's policy file of an ordinary user: `drop_capabilities no`, `no_new_privs no`, and
    `allow unshare` (with setns, mount, umount2, pivot_root, chroot) and `allow clone`."""
    path = sbx.weak_policy("floor", "default.policy", r"drop_capabilities\s+yes\b.*", "drop_capabilities no")
    with open(path) as f:
        text = f.read()
    text, n = re.subn(r"(?m)^no_new_privs\s+yes\b.*$", "no_new_privs no", text)
    assert n == 1
    with open(path, "w") as f:
        f.write(text)
    inc = os.path.join(os.path.dirname(path), sbx.syscalls_file())
    with open(inc) as f:
        text = f.read()
    text, n1 = re.subn(r"(?m)^errno EPERM (unshare setns .*)$", r"allow \1", text)
    text, n2 = re.subn(r"(?m)^allow clone when .*$", "allow clone", text)
    assert n1 == n2 == 1, (n1, n2)
    with open(inc, "w") as f:
        f.write(text)
    return path


# What the code holds once it has made a user namespace of its own, if it can.
_NEW_USERNS = """
import ctypes, json, os
libc = ctypes.CDLL(None, use_errno=True)
def caps():
    st = dict(l.split(":\t", 1) for l in open("/proc/self/status") if ":\t" in l)
    return {k: st[k].strip() for k in ("CapEff", "NoNewPrivs")}
out = {"before": caps()}
r = libc.unshare(0x10000000)  # CLONE_NEWUSER
out["unshare"] = [r, os.strerror(ctypes.get_errno()) if r else ""]
if r == 0:
    out["after"] = caps()
print(json.dumps(out))
"""


def test_unprivileged_floor_holds_against_the_users_own_policy():
    """The AppArmor profile lets sandboxd make user namespaces where the host refuses them to
    ordinary users: an ordinary user's policy must not pass a capable one on to the code
    (CapEff 000001ffffffffff after unshare, seen before the floor). As root the file is obeyed."""
    path = _users_own_policy()
    run = Runner(path)
    r = sbx.code(_NEW_USERNS, policy=path)
    assert r.rc == 0, r.describe()
    got = r.json()
    show = sbx.sandboxd("policy", "show", path)
    assert show.rc == 0, show.describe()
    lines = show.stdout.splitlines()
    if sbx.IS_ROOT:
        # Root's behaviour stays: what the file says holds (the test policies rely on it).
        assert got["unshare"][0] == 0 and got["after"]["CapEff"] != "0000000000000000", got
        assert check_no_new_privs(run) and check_clone_namespaces(run)
        assert "drop_capabilities  no" in lines and "allow unshare" in lines, show.stdout
        return
    assert got["unshare"] == [-1, os.strerror(1)], got  # EPERM
    assert got["before"] == {"CapEff": "0000000000000000", "NoNewPrivs": "1"}, got
    for check in (check_capabilities, check_no_new_privs, check_clone_namespaces, check_denied_syscalls):
        assert check(run) == [], (check.__name__, check(run))
    # `policy show` prints what is enforced, the floor included and marked.
    assert "drop_capabilities  yes   # floor: sandboxd is not root (the file says no)" in lines, show.stdout
    assert "no_new_privs       yes   # floor: sandboxd is not root (the file says no)" in lines, show.stdout
    assert "errno EPERM unshare   # floor: sandboxd is not root" in lines, show.stdout
    assert not [ln for ln in lines if ln.startswith("allow unshare") or ln == "allow clone"], show.stdout
    assert [ln for ln in lines if ln.startswith("allow clone when arg0 & 0x7e020080 == 0x0")], show.stdout
    # The shipped policy already holds the floor: unprivileged, it is enforced as written.
    shipped = sbx.sandboxd("policy", "show", sbx.shipped_policy("default"))
    assert "floor" not in shipped.stdout, shipped.stdout


def test_bench_switch_is_not_in_this_build():
    """bench/parts' switch (SBX_BENCH_WITHOUT, compiled in only with SBX_BENCH_PARTS) turns the
    cgroup and seccomp off; in the build under test the environment variable changes nothing."""
    assert b"SBX_BENCH_WITHOUT" not in open(sbx.SANDBOXD, "rb").read()
    r = sbx.code("print(open('/proc/self/status').read())",
                 env=dict(os.environ, SBX_BENCH_WITHOUT="cgroup,seccomp"))
    assert r.rc == 0, r.describe()
    st = dict(ln.split(":\t", 1) for ln in r.stdout.splitlines() if ":\t" in ln)
    assert st.get("Seccomp", "").strip() == "2", st.get("Seccomp")
    assert r.report["limits"] == sbx.enforcement(), (r.report["limits"], sbx.enforcement())
