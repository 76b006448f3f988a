# SPDX-License-Identifier: Apache-2.0
# sandboxd's fork template (`sandboxd mcp --warm-mode fork`, src/fork_template.c). sandboxd sends
# this file's text as the first message on fd 3 to `python3 -c TEMPLATE_BOOT` (fork_template.c:
# it execs it, so that neither ps nor a call's /proc/1/cmdline shows this text) inside a sandbox of
# its own (the template sandbox: the call policy's rootfs, binds, env and identity; /proc unmasked
# and clone/unshare with namespace flags and mount allowed, so that a child can make a call's
# namespaces). The template never runs user code. It reads its setup from
# fd 3 once (the runner's source, the call policy's compiled seccomp filter, the call's limits),
# then serves one fork per message on fd 3: each message carries the call's fds. Per call:
#   pid 1 of a new pid namespace (P1), forked by clone(2) with fresh user, mnt, pid, net, ipc and
#     uts namespaces (_fork_call: one copy of the template per call, not two): joins the call's
#     cgroup (v1: through the files sandboxd opened), its uid/gid mapped to the template's (as
#     root: by sandboxd, after the hello, to a host id of the call's own); says hello (its pid
#     reaches sandboxd by SCM_CREDENTIALS), waits for sandboxd's ack (v2: sandboxd moved it into
#     the call's cgroup); the user namespace's kernel budgets, fresh tmpfs /tmp,
#     /workspace(/out), /dev/shm and /run (the binds under them bound again); then fresh /proc
#     with the policy's masks, loopback up, a
#     cgroup namespace rooted at the call's cgroup, stdio and the call's fd 3, every other fd
#     closed, rlimits, capabilities dropped, no_new_privs, not dumpable, the policy's seccomp
#     filter (the same BPF the cold path installs); READY (with the workspace tmpfs), sandboxd's
#     go (it holds a pidfd on P1 now), then it forks the code process and, like init.c, relays
#     signals, reaps, and reports the status.
#   code process: dumpable again (as an exec'd runner is), the template's modules and globals
#     gone from sys.modules and __main__, then the runner (runner.py) reads the job from fd 3.
# Where sandboxd sends the C pid 1 (zygote.c: _zygote, _zspawn, _zcode), P1 is C code sharing
# this process's memory that takes the same steps (but not dumpable: callinit sets that), forks
# the code process from this process's memory, and execs callinit before the code goes on.
# Nothing here may write to stdout or stderr: a fork would inherit what is buffered.
_main_keys = set(globals())  # what __main__ holds before this file's names (a call gets only these)
import sys

_before = set(sys.modules)  # what a cold runner starts with (a call gets only these)
# Imported here, once: an import in a call would load the module on every call. Not threading:
# its after-fork hook would run in every fork (a call's pid 1 and its code process), about 90
# page faults each; ctypes imports it through sysconfig, which it needs on Android only.
sys.modules["sysconfig"] = type(sys)("sysconfig")
import ctypes

del sys.modules["sysconfig"], ctypes._sysconfig
import fcntl
import os
import resource
import stat
import struct

# The C modules under signal and socket: their Python wrappers import enum (and more), memory
# every fork copies.
import _signal as signal
import _socket as socket

_libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC = 0x20000, 0x2000000, 0x4000000, 0x8000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = (
    1, 2, 4, 8, 32, 4096, 16384, 1 << 18)
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_SECCOMP, PR_CAPBSET_DROP = 1, 4, 22, 24
PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, PR_SET_CHILD_SUBREAPER = 38, 47, 4, 36
SECCOMP_MODE_FILTER = 2
CALL_NAMESPACES = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS

# clone(2) as os.fork() calls fork(): through PyDLL, which keeps the GIL (as os.fork does), between
# PyOS_BeforeFork and PyOS_AfterFork_Child/Parent, the C API's hooks for a fork made outside
# os.fork. Raw clone with a null stack is fork with namespace flags (glibc's fork takes none). Its
# number per architecture sandboxd builds filters for (seccomp.c); the arguments after the flags
# are zero, so their order (it differs on aarch64) does not matter.
_CLONE_NR = {"x86_64": 56, "aarch64": 220}.get(os.uname().machine)
_raw = ctypes.PyDLL(None, use_errno=True)
_syscall = _raw.syscall
_syscall.restype = ctypes.c_long
_syscall.argtypes = [ctypes.c_long] * 6
_before_fork, _after_fork_child, _after_fork_parent = (
    ctypes.pythonapi.PyOS_BeforeFork, ctypes.pythonapi.PyOS_AfterFork_Child, ctypes.pythonapi.PyOS_AfterFork_Parent)
FORWARDED = (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT, signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2)
SETUP_FAILED = 125


def _ck(r, what):
    if r != 0:
        e = ctypes.get_errno()
        raise OSError(e, "%s: %s" % (what, os.strerror(e)))


def _mount(src, dst, fs, flags, data=None):
    _ck(_libc.mount(src and src.encode(), dst.encode(), fs and fs.encode(), ctypes.c_ulong(flags),
                    data and data.encode()), "mount `%s`" % dst)


class _Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


class _CapHdr(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("e", ctypes.c_uint), ("p", ctypes.c_uint), ("i", ctypes.c_uint)]


def _read_setup(ctl):
    """The one setup message: "key value" lines, an empty line, then the runner and the filters;
    with it, unless sandboxd rules it out, the C pid 1 and its init (fork_zygote.c)."""
    msg, anc, _, _ = ctl.recvmsg(1 << 20, socket.CMSG_SPACE(2 * 4))
    zfds = []
    for level, kind, data in anc:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            zfds += struct.unpack("%di" % (len(data) // 4), data[:len(data) - len(data) % 4])
    head, _, body = msg.partition(b"\n\n")
    cfg = {"mask": [], "ro": []}
    for line in head.decode().split("\n"):
        k, _, v = line.partition(" ")
        if k in ("mask", "ro"):
            cfg[k].append(v)
        elif k == "hostname":
            cfg[k] = v
        else:
            cfg[k] = int(v)
    n_runner, n_main = cfg["runner"], cfg["main"]
    cfg["runner_code"] = compile(body[:n_runner], "<string>", "exec")
    cfg["main_prog"] = ctypes.create_string_buffer(body[n_runner:n_runner + n_main], n_main)
    n_except = cfg["except"]
    cfg["except_prog"] = (ctypes.create_string_buffer(body[n_runner + n_main:n_runner + n_main + n_except],
                                                      n_except) if n_except else None)
    cfg["zygote_fds"] = zfds
    return cfg


def _write(path, text):
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _budget_values(cfg):
    """The new user namespace's kernel budgets (ns.c write_userns_budgets: the same list), those
    this kernel has."""
    ns = cfg["namespaces"]
    return [(name, v) for name, v in (
        ("inotify_instances", cfg["inotify_instances"]), ("inotify_watches", cfg["inotify_watches"]),
        ("fanotify_groups", cfg["fanotify_groups"]), ("fanotify_marks", cfg["fanotify_marks"]),
        ("user_namespaces", ns), ("mnt_namespaces", ns), ("pid_namespaces", ns), ("net_namespaces", ns),
        ("ipc_namespaces", ns), ("uts_namespaces", ns), ("cgroup_namespaces", ns), ("time_namespaces", ns))
        if name in cfg["budget_files"]]


def _budgets(cfg):
    for name, v in _budget_values(cfg):
        _write("/proc/sys/user/max_" + name, "%d" % v)


def _fresh_mounts(cfg):
    """The call's fresh tmpfs mounts, in order: path, flags, options."""
    return (("/tmp", MS_NOSUID | MS_NODEV, "size=%d,mode=1777" % cfg["tmp"]),
            ("/workspace", MS_NOSUID | MS_NODEV, "size=%d,mode=755" % cfg["workspace"]),
            ("/dev/shm", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=%d,mode=1777" % cfg["shm"]),
            ("/run", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=1048576,mode=755"))


def _mask(rel):
    try:
        st = os.lstat(rel)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        _mount("tmpfs", rel, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=555")
    else:
        _mount("/dev/null", rel, None, MS_BIND)


def _readonly(rel):
    try:
        os.lstat(rel)
    except FileNotFoundError:
        return
    _mount(rel, rel, None, MS_BIND | MS_REC)
    _mount(None, rel, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)


def _rlimits(cfg):
    def budget(res, v):
        hard = resource.getrlimit(res)[1]
        if hard != resource.RLIM_INFINITY and hard < v:
            v = hard
        resource.setrlimit(res, (v, v))

    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NOFILE, (cfg["nofile"], cfg["nofile"]))
    resource.setrlimit(resource.RLIMIT_FSIZE, (cfg["fsize"], cfg["fsize"]))
    budget(resource.RLIMIT_SIGPENDING, cfg["sigpending"])
    budget(resource.RLIMIT_MSGQUEUE, cfg["msgqueue"])
    budget(resource.RLIMIT_MEMLOCK, cfg["memlock"])
    if cfg["degraded"]:
        resource.setrlimit(resource.RLIMIT_AS, (cfg["memory"], cfg["memory"]))
        resource.setrlimit(resource.RLIMIT_NPROC, (cfg["pids"], cfg["pids"]))
        resource.setrlimit(resource.RLIMIT_CPU, (cfg["cpu_seconds"], cfg["cpu_seconds"]))


def _drop_privileges(cfg):
    """caps.c and sandbox_child's order: bounding set and capabilities, no_new_privs, not
    dumpable, the filter last (exceptions first, as seccomp_install)."""
    for c in range(64):
        if _libc.prctl(PR_CAPBSET_DROP, c, 0, 0, 0) != 0 and ctypes.get_errno() == 22:  # EINVAL: past the last
            break
    _ck(_libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "clear ambient capabilities")
    _ck(_libc.capset(ctypes.byref(_CapHdr(0x20080522, 0)), (_CapData * 2)()), "capset")
    _ck(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
    _libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    for prog in (cfg["except_prog"], cfg["main_prog"]):
        if prog is not None:
            fp = _Fprog(len(prog) // 8, ctypes.cast(prog, ctypes.c_void_p))
            _ck(_libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fp), 0, 0), "install seccomp filter")


def _send(sock, text, fds=()):
    if fds:
        sock.sendmsg([text.encode()], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("%di" % len(fds), *fds))])
    else:
        sock.send(text.encode())


def _code(cfg, sock_fd):
    """The code's process: what an exec'd runner would hold, then the runner."""
    for s in FORWARDED + (signal.SIGCHLD,):
        signal.signal(s, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_SETMASK, [])
    os.setsid()
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    os.close(sock_fd)
    os.closerange(4, 1 << 20)
    _libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)  # as after exec: the code may read its own /proc files
    os.chdir("/workspace")
    code = cfg["runner_code"]
    modules, keep, before, _exit = sys.modules, _main_keys, _before, os._exit
    # A fresh __main__ with what a cold one holds, not this file's names deleted one by one: each
    # deletion writes to the object it drops (a page copied per object). The template's modules
    # leave sys.modules; this frame keeps them and the old __main__ (never returns: _exit).
    old = modules["__main__"]
    main = type(sys)("__main__")
    main.__dict__.update((k, v) for k, v in old.__dict__.items() if k in keep)
    modules["__main__"] = main
    gone = [modules.pop(k) for k in list(modules) if k not in before]
    exec(code, main.__dict__)
    _exit(0)


def _proxy_env(port):
    url = "http://127.0.0.1:%d" % port
    for k in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        os.environ.setdefault(k, url)
    for k in ("NO_PROXY", "no_proxy"):
        os.environ.setdefault(k, "")
    os.environ.setdefault("NODE_USE_ENV_PROXY", "1")


def _pid1(cfg, sock, out_w, err_w, chan):
    _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    _budgets(cfg)  # through the call's own /proc, before its masks (mount.c mount_proc says why)
    if cfg["mask_proc"]:
        os.chdir("/")
        for p in cfg["mask"]:
            _mask(p.lstrip("/"))
        for p in cfg["ro"]:
            _readonly(p.lstrip("/"))
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    fcntl.ioctl(s, 0x8914, struct.pack("16sh22x", b"lo", 0x41))  # SIOCSIFFLAGS: IFF_UP|IFF_RUNNING
    s.close()
    _ck(_libc.unshare(CLONE_NEWCGROUP), "unshare(CLONE_NEWCGROUP)")
    ws = os.open("/workspace", os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    # stdio, the call's fd 3 (the bridge or the job socket) and the sync socket at 4; nothing else.
    hi = [fcntl.fcntl(f, fcntl.F_DUPFD_CLOEXEC, 100) for f in (out_w, err_w, chan, sock.fileno(), ws)]
    os.dup2(hi[0], 1)
    os.dup2(hi[1], 2)
    os.dup2(hi[2], 3)
    os.dup2(hi[3], 4, inheritable=False)
    os.dup2(hi[4], 5, inheritable=False)
    os.closerange(6, 1 << 20)
    sock_fd, ws = 4, 5
    _sync[0] = sock_fd  # where a failure from here on is reported
    _rlimits(cfg)
    pidns = os.stat("/proc/self/ns/pid")
    for sig in FORWARDED:
        signal.signal(sig, lambda *_: None)
    signal.pthread_sigmask(signal.SIG_BLOCK, FORWARDED + (signal.SIGCHLD,))
    # network proxy: the egress listener in this network namespace, served from the host side by
    # the proxy sandboxd starts on it (egress_proxy.c), and the variables that name it, below the
    # policy's env and --env, as the cold path sets them (sandbox.c).
    fds = [ws]
    if cfg["proxy"]:
        lst = socket.socket(socket.AF_INET, socket.SOCK_STREAM | socket.SOCK_NONBLOCK)
        lst.bind(("127.0.0.1", cfg["proxy"]))
        lst.listen(64)
        fds.append(lst.detach())
        _proxy_env(cfg["proxy"])
    _drop_privileges(cfg)
    sync = socket.socket(fileno=sock_fd)
    _send(sync, "ready %d %d" % (pidns.st_ino, pidns.st_dev), fds)
    for f in fds:
        os.close(f)
    # sandboxd opens a pidfd on this process from the pid READY carried, then says go: until then
    # this process cannot exit (its pid names it, and no other), whatever the code would do.
    if sync.recv(16) != b"go":
        os._exit(SETUP_FAILED)
    code = os.fork()
    if code == 0:
        try:
            _code(cfg, sock_fd)
        except BaseException as e:  # before the runner took over: the call's stderr says why
            os.write(2, ("sandboxd: the call's sandbox: %s\n" % e).encode())
            os._exit(SETUP_FAILED)
    status = None
    while status is None:
        sig = signal.sigwait(FORWARDED + (signal.SIGCHLD,))
        if sig != signal.SIGCHLD:
            os.kill(code, sig)
            continue
        while True:
            try:
                pid, st = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            if pid == code:
                status = st
    # Its usage and its waited children's (the code's), as wait4 gives a cold sandbox's init: the
    # server's figures where no cgroup counts them (sandbox_fork_wait).
    ru_s, ru_c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_us = int((ru_s.ru_utime + ru_s.ru_stime + ru_c.ru_utime + ru_c.ru_stime) * 1e6)
    _send(sync, "exit %d %d %d" % (status, cpu_us, max(ru_s.ru_maxrss, ru_c.ru_maxrss)))
    os._exit(0)


FRESH = ("/tmp", "/workspace", "/dev/shm", "/run")


def _unescape(field):
    """A mountinfo path: the kernel writes space, tab, newline and backslash as \\ooo."""
    b, out, i = field.encode("utf-8", "surrogateescape"), bytearray(), 0
    while i < len(b):
        if b[i] == 0x5C and i + 3 < len(b) and all(0x30 <= c <= 0x37 for c in b[i + 1:i + 4]):
            out.append(int(b[i + 1:i + 4], 8))
            i += 4
        else:
            out.append(b[i])
            i += 1
    return out.decode("utf-8", "surrogateescape")


def _binds_under():
    """The mounts under each of FRESH in the template (its mount namespace never changes): the
    outermost ones, with their flags, to bind again over a call's fresh tmpfs."""
    under = {p: [] for p in FRESH}
    for line in open("/proc/self/mountinfo"):
        f = line.split()
        dst = _unescape(f[4])
        for path, binds in under.items():
            if dst.startswith(path + "/") and not any(dst.startswith(d + "/") for d, _, _ in binds):
                opts = f[5].split(",")
                flags = sum(v for k, v in (("ro", MS_RDONLY), ("nosuid", MS_NOSUID), ("nodev", MS_NODEV),
                                           ("noexec", MS_NOEXEC)) if k in opts)
                binds.append((dst, flags, os.path.isdir(dst)))
    return under


def _fresh(cfg, path, flags, data):
    """A fresh tmpfs at path (the template's is shared by its calls), with the binds under it (a
    --bind into /workspace, sandboxd's Python helpers at /run/sandboxd/python) bound again."""
    binds = [(dst, os.open(dst, os.O_PATH | os.O_CLOEXEC), bflags, isdir) for dst, bflags, isdir in cfg["under"][path]]
    _mount("tmpfs", path, "tmpfs", flags, data)
    for dst, fd, bflags, isdir in binds:
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        if isdir:
            os.mkdir(dst)
        else:
            os.close(os.open(dst, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o644))
        _mount("/proc/self/fd/%d" % fd, dst, None, MS_BIND | MS_REC)
        if bflags:
            _mount(None, dst, None, MS_REMOUNT | MS_BIND | bflags)
        os.close(fd)


def _fork_call():
    """A fork of this process that is pid 1 of fresh call namespaces (CALL_NAMESPACES): 0 in the
    child, its pid here. glibc's cached thread id stays the template's in the child, which only
    raise() and pthread_kill() use; the code process is forked by os.fork(), which sets its own."""
    if _CLONE_NR is None:
        raise OSError(38, "clone: no system call number for %s" % os.uname().machine)
    _before_fork()
    pid = _syscall(_CLONE_NR, CALL_NAMESPACES | signal.SIGCHLD, 0, 0, 0, 0)
    if pid == 0:
        _after_fork_child()
        return 0
    e = ctypes.get_errno()
    _after_fork_parent()
    if pid < 0:
        raise OSError(e, "clone: %s" % os.strerror(e))
    return pid


def _call(cfg, fds):
    """pid 1 of the call's namespaces, just forked: the call's sandbox, then the code (_pid1)."""
    sock_fd, out_w, err_w, chan = fds[:4]
    _sync[0] = sock_fd
    sock = socket.socket(fileno=sock_fd)
    for f in fds[4:]:  # cgroup v1: the call's cgroup, before anything else
        os.write(f, b"0")
        os.close(f)
    uid, gid = cfg["uid"], cfg["gid"]
    if not cfg["server_maps"]:  # its ids mapped to the template's, which are ours
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", "%d %d 1" % (uid, uid))
        _write("/proc/self/gid_map", "%d %d 1" % (gid, gid))
    _send(sock, "hello")
    if sock.recv(16) != b"ack":
        os._exit(SETUP_FAILED)
    if cfg["server_maps"]:
        # As root, sandboxd mapped them to a host id of the call's own (ns_write_call_maps): this
        # process is the template's host id until it takes them.
        os.setgroups([])
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    for path, flags, data in _fresh_mounts(cfg):
        _fresh(cfg, path, flags, data)
        # /workspace/out as the cold path's (sandbox_child), unless a bind is there.
        if path == "/workspace" and not os.path.isdir("/workspace/out"):
            os.mkdir("/workspace/out", 0o755)
    _pid1(cfg, sock, out_w, err_w, chan)


_sync = [-1]  # the call's sync socket, where it is now


def _say_error(fd, e):
    """Say why setup failed on the call's sync socket fd (sandboxd shows it)."""
    try:
        os.write(fd, ("error %s" % e).encode()[:500])
    except BaseException:
        pass


def _fail(e):
    """Setup failed: say why on the call's sync socket, where it is now, and exit."""
    _say_error(_sync[0], e)
    os._exit(SETUP_FAILED)


def _reap(*_):
    while True:
        try:
            pid = os.waitpid(-1, os.WNOHANG)[0]
        except ChildProcessError:
            return
        if pid == 0:
            return
        if _zy[0] is not None:  # a C pid 1's stack goes with it
            _zy[0].zy_reaped(pid)


# The C pid 1 (zygote.c, from sandboxd's fork_zygote.c): a call's sandbox is built by C code
# that shares this process's memory until it execs callinit, and the code process is the one
# copy of this process per call. Without it (not offered, or it did not load), _call and _pid1.
_zy = [None]


class _ZCall(ctypes.Structure):  # zygote.c struct zcall
    _fields_ = [("fds", ctypes.c_int * 16), ("n_fds", ctypes.c_int), ("pipe_w", ctypes.c_int),
                ("cpu_seconds", ctypes.c_ulong)]


def _zygote(cfg):
    """Load and set up the C pid 1 sandboxd sent: the library, and None; or None and why not (None
    too when it was not sent: sandboxd says why)."""
    zfds = cfg.pop("zygote_fds")
    if len(zfds) != 2:
        for f in zfds:
            os.close(f)
        return None, None
    so_fd, init_fd = zfds
    try:
        lib = ctypes.PyDLL("/proc/self/fd/%d" % so_fd)
    except OSError as e:
        os.close(init_fd)
        return None, "load it: %s" % e
    finally:
        os.close(so_fd)
    lines = ["%s %d" % (k, cfg[k]) for k in ("uid", "gid", "server_maps", "mask_proc", "degraded", "nofile", "fsize",
                                               "sigpending", "msgqueue", "memlock", "memory", "pids", "proxy")]
    lines += ["budget %s %d" % nv for nv in _budget_values(cfg)]
    for path, flags, data in _fresh_mounts(cfg):
        lines.append("fresh %s %d %s" % (path, flags, data))
        lines += ["under %d %d %s" % (bflags, isdir, dst) for dst, bflags, isdir in cfg["under"][path]]
    lines += ["mask " + p for p in cfg["mask"]] + ["ro " + p for p in cfg["ro"]]
    if any("\n" in line or "\0" in line for line in lines):
        os.close(init_fd)
        return None, "a path with a newline"
    rseq_offset = rseq_size = 0  # glibc's rseq area, which the code process registers again
    try:
        rseq_size = ctypes.c_uint.in_dll(_libc, "__rseq_size").value
        rseq_offset = ctypes.c_ssize_t.in_dll(_libc, "__rseq_offset").value
    except ValueError:  # another libc, or an older glibc: none
        pass
    lib.zy_init.restype = lib.zy_spawn.restype = ctypes.c_long
    lib.zy_init.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong,
                            ctypes.c_long, ctypes.c_ulong, ctypes.c_int]
    lib.zy_spawn.argtypes = [ctypes.c_ulong, ctypes.c_void_p]
    lib.zy_reaped.argtypes = [ctypes.c_int]
    main, exc = cfg["main_prog"], cfg["except_prog"]
    r = lib.zy_init(("\n".join(lines) + "\n").encode("utf-8", "surrogateescape"), ctypes.addressof(main), len(main),
                    exc and ctypes.addressof(exc), len(exc) if exc else 0, rseq_offset,
                    max(rseq_size, 32) if rseq_size else 0, init_fd)
    if r < 0:
        os.close(init_fd)
        return None, "its setup: %s" % os.strerror(-r)
    return lib, None


def _zspawn(zy, fds, msg):
    """The call's C pid 1: its pid once it has forked the code; 0 in the code process."""
    if len(fds) > 16:
        raise OSError(7, "fork: %d fds" % len(fds))
    call = _ZCall(n_fds=len(fds), cpu_seconds=int(msg.split()[1]))
    call.fds[:len(fds)] = fds
    _before_fork()
    pid = zy.zy_spawn(CALL_NAMESPACES, ctypes.byref(call))
    if pid == 0:
        _after_fork_child()
        return 0
    _after_fork_parent()
    if pid < 0:
        raise OSError(-pid, "clone: %s" % os.strerror(-pid))
    return pid


def _zcode(cfg):
    """The code process under a C pid 1: the sandbox is built and pid 1 has left this memory; what
    the Python pid 1 sets in its own memory for the code (the proxy's variables), then the code."""
    try:
        if cfg["proxy"]:
            _proxy_env(cfg["proxy"])
        _code(cfg, 4)
    except BaseException as e:  # before the runner took over: the call's stderr says why
        os.write(2, ("sandboxd: the call's sandbox: %s\n" % e).encode())
        os._exit(SETUP_FAILED)


def _serve():
    ctl = socket.socket(fileno=3)
    cfg = _read_setup(ctl)
    cfg["under"] = _binds_under()
    cfg["budget_files"] = {n[4:] for n in os.listdir("/proc/sys/user") if n.startswith("max_")}
    cfg["uid"], cfg["gid"] = os.getuid(), os.getgid()  # a call's are mapped to these
    # What the imports and the setup left over goes before the first fork, not copied by each
    # (about 400 KiB of heap fewer, and fewer pages for a call to fault in).
    import gc

    gc.collect()
    _libc.malloc_trim(0)
    zy, why = _zygote(cfg)
    _zy[0] = zy
    # Orphaned pid 1s of the calls come back here to be reaped.
    _libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    signal.signal(signal.SIGCHLD, _reap)
    ctl.send(b"ok" if why is None else ("ok " + why).encode("utf-8", "replace")[:250])
    while True:
        msg, anc, _, _ = ctl.recvmsg(64, socket.CMSG_SPACE(16 * 4))
        fds = []
        for level, kind, data in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds += struct.unpack("%di" % (len(data) // 4), data[:len(data) - len(data) % 4])
        if not msg:
            os._exit(0)
        if len(fds) < 4:
            for f in fds:
                os.close(f)
            continue
        try:
            pid = _zspawn(zy, fds, msg) if zy else _fork_call()
        except OSError as e:  # the call fails with why (a namespace budget spent, say); not the template
            _say_error(fds[0], e)
            pid = -1
        if pid == 0 and zy:
            ctl.detach()  # fd 3 is the call's now: pid 1 put it there
            _zcode(cfg)
        if pid == 0:
            _sync[0] = fds[0]
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            ctl.close()
            try:
                cfg["cpu_seconds"] = int(msg.split()[1])
                _call(cfg, fds)
            except BaseException as e:  # _sync[0]: where the sync socket is by then
                _fail(e)
        for f in fds:
            os.close(f)


_serve()
