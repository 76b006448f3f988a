"""Kernel budgets: what the kernel counts per user or per user namespace, outside any cgroup
(inotify instances and watches, pending signals, POSIX message queue bytes, SHM_LOCKed bytes,
namespaces, pipe buffers), is bounded per sandbox by the policy, so code that exhausts a budget from inside leaves
the host user's intact: root's when sandboxd runs as root, the invoking user's otherwise.

Each test starts a sandbox whose code takes all it can of one budget, reports, and holds it until
its stdin closes; meanwhile this (host) process uses the same resource through ctypes. As root,
each concurrent sandbox also has a host uid/gid of its own (policy host_id_range)."""
import contextlib
import ctypes
import errno
import fcntl
import json
import os
import re
import select
import struct
import subprocess
import sys
import time

import pytest

import sbx

pytestmark = pytest.mark.security

libc = ctypes.CDLL("libc.so.6", use_errno=True)
IN_CLOEXEC = 0o2000000
IN_ATTRIB = 0x4
IN_MASK_CREATE = 0x10000000  # a second watch of the same inode fails (EEXIST) instead of counting twice
CLOCK_MONOTONIC = 1
NS_GET_OWNER_UID = 0xB704
LOCK_FILE = "/run/sandboxd/host-ids.lock"

# Run inside the sandbox before each test's code: held(**facts) reports and waits for stdin's EOF.
PRELUDE = r'''
import ctypes, errno, json, os, sys
libc = ctypes.CDLL("libc.so.6", use_errno=True)
def err():
    e = ctypes.get_errno()
    return errno.errorcode.get(e, str(e))
def held(**facts):
    print(json.dumps(facts), flush=True)
    sys.stdin.read()
'''


def host_errno():
    e = ctypes.get_errno()
    return errno.errorcode.get(e, str(e))


def policy_values(policy="default"):
    """The budgets `sandboxd policy show` prints (key -> text of its value)."""
    r = sbx.sandboxd("policy", "show", policy)
    assert r.rc == 0, r.describe()
    out = {}
    for line in r.stdout.splitlines():
        m = re.match(r"(\w+)\s+(\S+)", line)
        if m:
            out.setdefault(m.group(1), m.group(2))
    return out


def budget(key, policy="default"):
    v = policy_values(policy)[key]
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(v[-1:], 1)
    return int(v.rstrip("KMG")) * mult


class Held:
    """A running sandbox holding a budget; .facts is what its code reported."""

    def __init__(self, src, args=(), policy=None, timeout=60):
        self.cmd = sbx.exec_cmd(("-c", PRELUDE + src), args, policy=policy, opts=["--timeout", "60"])
        self.p = subprocess.Popen(self.cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE)
        deadline = time.monotonic() + timeout
        line = b""
        while not line.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.p.stdout], [], [], left)[0]:
                self.close()
                raise AssertionError(f"the sandbox did not report within {timeout}s: {self.cmd[:4]}")
            chunk = os.read(self.p.stdout.fileno(), 65536)
            if not chunk:
                err = self.p.stderr.read().decode("utf-8", "replace")
                self.close()
                raise AssertionError(f"the sandbox exited before reporting (status {self.p.returncode}): {err}")
            line += chunk
        self.facts = json.loads(line.decode().strip().splitlines()[-1])

    def close(self):
        if self.p.stdin and not self.p.stdin.closed:
            self.p.stdin.close()
        try:
            self.p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
        for f in (self.p.stdout, self.p.stderr):
            f.close()
        return self.p.returncode


@contextlib.contextmanager
def holding(src, *args, policy=None):
    h = Held(src, args, policy=policy)
    try:
        yield h
    finally:
        h.close()


# ---------------------------------------------------------------- the values inside


USERNS_FILES = {
    "max_inotify_instances": "inotify_instances", "max_inotify_watches": "inotify_watches",
    "max_fanotify_groups": "fanotify_groups", "max_fanotify_marks": "fanotify_marks",
    **{f"max_{k}_namespaces": "namespaces" for k in ("user", "mnt", "pid", "net", "ipc", "uts", "cgroup", "time")},
}


@pytest.mark.parametrize("tag", ["shipped", "changed"])
def test_userns_budgets_inside_are_the_policys(tag):
    """/proc/sys/user/max_* inside (a new user namespace starts at 2147483647) and the two rlimits
    are what the policy says: the shipped default, and a copy with every budget changed."""
    policy = None
    if tag == "changed":
        policy = sbx.weak_policy("budgets-changed", "default.policy", r"inotify_instances\s.*", "inotify_instances 7")
    r = sbx.code("import json, os, resource\n"
                 "d = {f: int(open('/proc/sys/user/' + f).read()) for f in os.listdir('/proc/sys/user')}\n"
                 "d['sigpending'] = resource.getrlimit(resource.RLIMIT_SIGPENDING)\n"
                 "d['msgqueue'] = resource.getrlimit(resource.RLIMIT_MSGQUEUE)\n"
                 "d['memlock'] = resource.getrlimit(resource.RLIMIT_MEMLOCK)\n"
                 "print(json.dumps(d))", policy=policy)
    assert r.rc == 0, r.describe()
    d = r.json()
    unbounded = sorted(f for f, v in d.items() if f in USERNS_FILES and v >= 2 ** 31 - 1)
    assert not unbounded, f"unbounded inside the sandbox: {unbounded}"
    want = {k: budget(k) for k in set(USERNS_FILES.values()) | {"sigpending", "msgqueue", "memlock"}}
    if tag == "changed":
        want["inotify_instances"] = 7
    for f, key in USERNS_FILES.items():
        if f in d or f in os.listdir("/proc/sys/user"):  # the kernel has this count
            assert d.get(f) == want[key], f"{f} inside is {d.get(f)}, policy `{key}` is {want[key]}"
    assert d["sigpending"] == [want["sigpending"]] * 2, d
    assert d["msgqueue"] == [want["msgqueue"]] * 2, d
    assert d["memlock"] == [want["memlock"]] * 2, d


# ---------------------------------------------------------------- each budget held


def test_inotify_instances_held_inside_host_still_gets_one():
    src = r'''
fds, e = [], None
while len(fds) < 100000:
    fd = libc.inotify_init1(0o2000000)
    if fd < 0:
        e = err()
        break
    fds.append(fd)
held(n=len(fds), error=e)
'''
    with holding(src) as h:
        fd = libc.inotify_init1(IN_CLOEXEC)
        got = host_errno() if fd < 0 else None
        if fd >= 0:
            os.close(fd)
    assert got is None, f"host inotify_init1 failed with {got} while the sandbox held {h.facts['n']} instances"
    assert h.facts["error"] == "EMFILE", h.facts
    assert h.facts["n"] <= budget("inotify_instances"), h.facts


def test_inotify_watches_held_inside_host_still_adds_one():
    src = r'''
insts = []
while len(insts) < 256:
    fd = libc.inotify_init1(0o2000000)
    if fd < 0:
        break
    insts.append(fd)
paths = []
for d, dirs, files in os.walk("/usr"):
    paths.append(d.encode())
    paths += [os.path.join(d, f).encode() for f in files]
n, e = 0, None
for fd in insts:
    for p in paths:
        if libc.inotify_add_watch(fd, p, 0x4 | 0x10000000) >= 0:
            n += 1
        elif ctypes.get_errno() == errno.ENOSPC:
            e = "ENOSPC"
            break
    if e:
        break
held(n=n, error=e, instances=len(insts), paths=len(paths))
'''
    # The host's instance first: the instance budget has its own test.
    ifd = libc.inotify_init1(IN_CLOEXEC)
    assert ifd >= 0, host_errno()
    try:
        with holding(src) as h:
            wd = libc.inotify_add_watch(ifd, os.path.dirname(os.path.abspath(__file__)).encode(), IN_ATTRIB)
            got = host_errno() if wd < 0 else None
    finally:
        os.close(ifd)
    assert got is None, f"host inotify_add_watch failed with {got} while the sandbox held {h.facts['n']} watches"
    assert h.facts["error"] == "ENOSPC", f"the sandbox never ran out of watches: {h.facts}"
    assert h.facts["n"] <= budget("inotify_watches"), h.facts


def test_pending_signals_held_inside_host_still_creates_a_timer():
    # Each POSIX timer holds a preallocated queued signal, counted against RLIMIT_SIGPENDING.
    src = r'''
tid = ctypes.c_void_p()
n, e = 0, None
while n < 1000000:
    if libc.timer_create(1, None, ctypes.byref(tid)) != 0:
        e = err()
        break
    n += 1
held(n=n, error=e)
'''
    with holding(src) as h:
        tid = ctypes.c_void_p()
        rc = libc.timer_create(CLOCK_MONOTONIC, None, ctypes.byref(tid))
        got = host_errno() if rc != 0 else None
        if rc == 0:
            libc.timer_delete(tid)
    assert got is None, f"host timer_create failed with {got} while the sandbox held {h.facts['n']} timers"
    assert h.facts["error"] == "EAGAIN", h.facts
    assert h.facts["n"] <= budget("sigpending"), h.facts


def test_message_queue_bytes_held_inside_host_still_opens_one():
    # Default attributes (10 messages of 8 KiB): ~81 KiB of RLIMIT_MSGQUEUE each.
    src = r'''
qs, e = [], None
while len(qs) < 1000:
    q = libc.mq_open(("/budget%d" % len(qs)).encode(), os.O_CREAT | os.O_RDWR, 0o600, None)
    if q < 0:
        e = err()
        break
    qs.append(q)
held(n=len(qs), error=e)
'''
    name = f"/sbx-budget-test-{os.getpid()}".encode()
    with holding(src) as h:
        q = libc.mq_open(name, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600, None)
        got = host_errno() if q < 0 else None
        if q >= 0:
            libc.mq_close(q)
            libc.mq_unlink(name)
    assert got is None, f"host mq_open failed with {got} while the sandbox held {h.facts['n']} queues"
    assert h.facts["error"] == "EMFILE", h.facts
    assert h.facts["n"] * 81920 <= budget("msgqueue"), h.facts


def test_shm_locked_bytes_held_inside_host_still_locks_a_segment():
    """shmctl(SHM_LOCK) is counted per user against RLIMIT_MEMLOCK (kernel's user_shm_lock).
    Host root has CAP_IPC_LOCK and never fails; there the sandbox's own bound shows the budget.
    Without a cgroup the sandbox gets no segment at all (shmget: ENOSPC, test_shmem_limits.py)."""
    src = r'''
n, e = 0, None
while n < 100000:
    i = libc.shmget(0, 65536, 0o1000 | 0o600)
    if i < 0 or libc.shmctl(i, 11, None) != 0:
        e = err()
        break
    n += 1
held(n=n, error=e)
'''
    with holding(src) as h:
        i = libc.shmget(0, 65536, 0o1000 | 0o600)
        assert i >= 0, host_errno()
        rc = libc.shmctl(i, 11, None)  # SHM_LOCK
        got = host_errno() if rc != 0 else None
        libc.shmctl(i, 0, None)  # IPC_RMID
    assert got is None, f"host shmctl(SHM_LOCK) failed with {got} while the sandbox held {h.facts['n']} locked segments"
    assert h.facts["error"] == ("ENOSPC" if sbx.enforcement() == "degraded" else "ENOMEM"), h.facts
    assert h.facts["n"] * 65536 <= budget("memlock"), h.facts


# ---------------------------------------------------------------- root: a host id per sandbox

def need_root():
    sbx.root_only("unprivileged, the sandbox is the invoking user (no host_id_range)")


HOLD_ID = r'''
held()
'''


def host_pid(marker):
    """The host pid of the sandboxed python whose argv carries marker (not sandboxd's own)."""
    for pid, cmdline in sbx.processes_with(marker):
        if not cmdline.startswith(sbx.SANDBOXD):
            return pid
    raise AssertionError(f"no sandboxed process carries {marker}")


def ids_of(pid):
    with open(f"/proc/{pid}/status") as f:
        st = dict(l.split(":", 1) for l in f.read().splitlines() if ":" in l)
    return [int(x) for x in st["Uid"].split()], [int(x) for x in st["Gid"].split()]


def userns_owner(pid):
    fd = os.open(f"/proc/{pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
    try:
        buf = bytearray(4)
        fcntl.ioctl(fd, NS_GET_OWNER_UID, buf)
        return struct.unpack("I", buf)[0]
    finally:
        os.close(fd)


def id_locked(uid):
    """Whether some open file description holds byte uid of the lock file (F_OFD_GETLK)."""
    fd = os.open(LOCK_FILE, os.O_RDONLY | os.O_CLOEXEC)
    try:
        fl = struct.pack("@hhqqi4x", fcntl.F_WRLCK, os.SEEK_SET, uid, 1, 0)
        return struct.unpack("@hhqqi4x", fcntl.fcntl(fd, fcntl.F_OFD_GETLK, fl))[0] != fcntl.F_UNLCK
    finally:
        os.close(fd)


def test_concurrent_sandboxes_have_their_own_host_ids():
    need_root()
    start, count = sbx.host_id_range()
    seen = []
    with holding(HOLD_ID, "budget-ids-a") as a, holding(HOLD_ID, "budget-ids-b") as b:
        for marker in ("budget-ids-a", "budget-ids-b"):
            pid = host_pid(marker)
            uids, gids = ids_of(pid)
            assert len(set(uids)) == 1 and uids == gids, f"{marker}: Uid {uids} Gid {gids}"
            uid = uids[0]
            assert start <= uid < start + count, f"{marker}: host uid {uid} outside host_id_range {start} {count}"
            # The owner takes the per-user share of every count charged in the namespace.
            assert userns_owner(pid) == uid, f"{marker}: user namespace owned by {userns_owner(pid)}, not {uid}"
            assert id_locked(uid), f"{marker}: host id {uid} is not locked while its sandbox runs"
            seen.append(uid)
        assert seen[0] != seen[1], f"two concurrent sandboxes share host uid {seen[0]}"
    assert a.p.returncode == 0 and b.p.returncode == 0
    for uid in seen:
        assert not id_locked(uid), f"host id {uid} is still locked after its sandbox ended"


def test_pipe_buffers_of_one_sandbox_leave_another_full_pipes():
    """Pipe buffers are counted per host user (fs.pipe-user-pages-soft); past it, new pipes get two
    pages. One sandbox at its limit must not shrink another's pipes."""
    need_root()
    fill = r'''
import fcntl
pipes, e = [], None
while len(pipes) < 400:
    r, w = os.pipe()
    pipes.append((r, w))
    try:
        fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, 1 << 20)
    except OSError as x:
        e = errno.errorcode[x.errno]
        break
r, w = os.pipe()
held(n=len(pipes), error=e, new_pipe=fcntl.fcntl(w, fcntl.F_GETPIPE_SZ))
'''
    with holding(fill) as h:
        r = sbx.code("import fcntl, os; r, w = os.pipe(); print(fcntl.fcntl(w, fcntl.F_GETPIPE_SZ))")
    assert h.facts["error"] == "EPERM" and h.facts["new_pipe"] < 65536, f"the first sandbox never reached its pipe budget: {h.facts}"
    assert r.rc == 0, r.describe()
    assert int(r.stdout) == 65536, f"the second sandbox's pipe holds {r.stdout.strip()} bytes, not 64 KiB"


def test_host_id_range_exhausted_is_a_setup_error():
    need_root()
    start, _ = sbx.host_id_range()
    policy = sbx.weak_policy("budgets-one-id", "default.policy", r"host_id_range\s.*", f"host_id_range {start + 7} 1")
    with holding(HOLD_ID, policy=policy):
        r = sbx.run(("-c", "print('ran')"), policy=policy, want_report=False)
    sbx.assert_usage_error(r, "second sandbox with a one-id range")
    assert "host_id_range" in r.stderr and "in use" in r.stderr, r.describe()
    # Released with the first: the next sandbox runs.
    r = sbx.run(("-c", "print('ran')"), policy=policy, want_report=False)
    assert r.rc == 0 and r.stdout.strip() == "ran", r.describe()


@pytest.mark.parametrize("how", ["writable-dir", "symlinked-file"])
def test_lock_file_others_could_plant_is_refused(how):
    """Who can write /run/sandboxd or replace its lock file could take every host id, or make
    sandboxd lock what they choose: a directory writable by others, or a lock file that is a
    symbolic link, is refused (exit 125)."""
    need_root()
    d = os.path.dirname(LOCK_FILE)
    assert sbx.code("pass").rc == 0  # the directory and the file exist
    mode = os.stat(d).st_mode & 0o7777
    moved = LOCK_FILE + ".test-moved"
    try:
        if how == "writable-dir":
            os.chmod(d, 0o777)
        else:
            os.rename(LOCK_FILE, moved)
            os.symlink(moved, LOCK_FILE)
        r = sbx.run(("-c", "print('ran')"), want_report=False)
    finally:
        os.chmod(d, mode)
        if how == "symlinked-file":
            os.unlink(LOCK_FILE)
            os.rename(moved, LOCK_FILE)
    sbx.assert_usage_error(r, how)
    assert "host ids" in r.stderr, r.describe()
    assert sbx.code("pass").rc == 0


def run_as_root_of_userns(cmd, ids=65536):
    """cmd as uid 0 of a new user namespace mapping host ids 0..ids-1 (as a rootless container's
    root sees the world); returns (exit status, stderr)."""
    r, w = os.pipe()
    p = subprocess.Popen([sys.executable, "-c", (
        "import ctypes, os, sys\n"
        "libc = ctypes.CDLL('libc.so.6', use_errno=True)\n"
        "assert libc.unshare(0x10000000) == 0, ctypes.get_errno()\n"
        f"os.write({w}, b'u'); os.close({w})\n"
        "sys.stdin.read(1)\n"
        "os.execv(sys.argv[1], sys.argv[1:])\n")] + cmd,
        stdin=subprocess.PIPE, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, pass_fds=[w])
    os.close(w)
    assert os.read(r, 1) == b"u"
    os.close(r)
    for f in ("uid_map", "gid_map"):
        with open(f"/proc/{p.pid}/{f}", "w") as m:
            m.write(f"0 0 {ids}\n")
    _, err = p.communicate(b"g", timeout=60)
    return p.returncode, err.decode("utf-8", "replace")


def test_range_outside_a_containers_id_map_is_a_clear_setup_error():
    """sandboxd as root of a user namespace (a rootless container) can only use ids that namespace
    maps: the default range is refused with one line that says what to change, and a range inside
    the map works."""
    need_root()
    rc, err = run_as_root_of_userns(sbx.exec_cmd(("-c", "pass")))
    lines = [l for l in err.splitlines() if l.strip()]
    assert rc == 125 and len(lines) == 1 and "host_id_range" in lines[0] and "not mapped" in lines[0], err
    policy = sbx.weak_policy("budgets-in-map", "default.policy", r"host_id_range\s.*", "host_id_range 60000 100")
    rc, err = run_as_root_of_userns(sbx.exec_cmd(("-c", "pass"), policy=policy))
    assert rc == 0, err
