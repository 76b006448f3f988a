"""Runs INSIDE the sandbox: prints one JSON object of isolation facts for the tests to judge.

Every fact is gathered independently; a fact that cannot be read is reported as {"error": ...}
so one surprise does not hide the others. Self-contained: the sandbox sees only this file."""
import errno
import fcntl
import json
import os
import resource
import socket
import stat
import struct
import sys

facts = {}


def fact(name):
    def deco(fn):
        try:
            facts[name] = fn()
        except Exception as e:  # noqa: BLE001 - report, never crash
            facts[name] = {"error": f"{type(e).__name__}: {e}"}
        return fn
    return deco


def err(e):
    return errno.errorcode.get(e.errno, str(e.errno)) if isinstance(e, OSError) and e.errno else repr(e)


def read(path, limit=1 << 16):
    with open(path, "rb") as f:
        return f.read(limit).decode("utf-8", "replace")


@fact("ids")
def _():
    return {"resuid": list(os.getresuid()), "resgid": list(os.getresgid()), "groups": os.getgroups()}


@fact("uid_map")
def _():
    return [l.split() for l in read("/proc/self/uid_map").splitlines() if l.strip()]


@fact("gid_map")
def _():
    return [l.split() for l in read("/proc/self/gid_map").splitlines() if l.strip()]


@fact("setgroups")
def _():
    return read("/proc/self/setgroups").strip()


@fact("status")
def _():
    out = {}
    for line in read("/proc/self/status").splitlines():
        k, _, v = line.partition(":")
        if k.startswith("Cap") or k in ("NoNewPrivs", "Seccomp", "Seccomp_filters", "Uid", "Gid"):
            out[k] = v.strip()
    return out


@fact("hostname")
def _():
    return {"gethostname": socket.gethostname(), "nodename": os.uname().nodename,
            "proc": read("/proc/sys/kernel/hostname").strip()}


@fact("interfaces")
def _():
    # socket.if_nameindex() needs netlink, which the policy denies; /proc/net/dev needs nothing.
    names = [l.split(":")[0].strip() for l in read("/proc/net/dev").splitlines()[2:] if ":" in l]
    flags = {}
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    for n in names:
        try:
            r = fcntl.ioctl(s, 0x8913, struct.pack("16sh14x", n.encode(), 0))  # SIOCGIFFLAGS
            flags[n] = struct.unpack("16sh14x", r)[1]
        except OSError as e:
            flags[n] = err(e)
    s.close()
    return {"names": names, "flags": flags}


@fact("routes")
def _():
    return [l.split()[:3] for l in read("/proc/net/route").splitlines()[1:] if l.strip()]


@fact("outside_network")
def _():
    out = {}
    for name, family, kind, addr in (("udp4", socket.AF_INET, socket.SOCK_DGRAM, ("1.1.1.1", 53)),
                                     ("tcp4", socket.AF_INET, socket.SOCK_STREAM, ("10.255.255.1", 80))):
        s = socket.socket(family, kind)
        s.settimeout(2)
        try:
            s.connect(addr)
            if kind == socket.SOCK_DGRAM:
                s.send(b"x")
            out[name] = "connected"
        except OSError as e:
            out[name] = err(e) if e.errno else repr(e)
        finally:
            s.close()
    return out


@fact("processes")
def _():
    pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
    info = {}
    for p in pids:
        try:
            info[p] = {"cmdline": read(f"/proc/{p}/cmdline").split("\0")[:-1] or [],
                       "comm": read(f"/proc/{p}/comm").strip()}
        except OSError as e:
            info[p] = {"error": err(e)}
    return {"pid": os.getpid(), "ppid": os.getppid(), "pids": pids, "info": info}


@fact("env")
def _():
    return dict(os.environ)


@fact("fds")
def _():
    # The listing itself holds a descriptor that is closed again by the time we readlink it.
    out = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            out[name] = os.readlink(f"/proc/self/fd/{name}")
        except FileNotFoundError:
            pass
    return out


@fact("mounts")
def _():
    out = []
    for line in read("/proc/self/mountinfo", 1 << 20).splitlines():
        f = line.split()
        sep = f.index("-")
        out.append({"target": f[4], "root": f[3], "opts": f[5].split(","), "fstype": f[sep + 1],
                    "source": f[sep + 2], "super": f[sep + 3].split(",") if len(f) > sep + 3 else []})
    return out


@fact("statvfs_ro")
def _():
    out = {}
    for p in ("/", "/usr", "/etc", "/tmp", "/workspace", "/proc", "/proc/sys", "/proc/sysrq-trigger",
              "/proc/irq", "/proc/bus", "/proc/fs", "/sys", "/dev", "/dev/shm"):
        try:
            v = os.statvfs(p)
            out[p] = {"ro": bool(v.f_flag & os.ST_RDONLY), "nosuid": bool(v.f_flag & os.ST_NOSUID),
                      "nodev": bool(v.f_flag & getattr(os, "ST_NODEV", 4))}
        except OSError as e:
            out[p] = err(e)
    return out


@fact("rlimits")
def _():
    return {n: list(resource.getrlimit(getattr(resource, "RLIMIT_" + n)))
            for n in ("CORE", "NOFILE", "FSIZE", "AS", "NPROC", "STACK", "CPU")}


@fact("cwd")
def _():
    return os.getcwd()


@fact("python")
def _():
    return {"executable": sys.executable, "argv": sys.argv, "version": list(sys.version_info[:3]),
            "file": os.path.abspath(__file__), "umask": os.umask(0o22)}


@fact("script")
def _():
    st = os.stat(__file__)
    try:
        with open(__file__, "a"):
            writable = "yes"
    except OSError as e:
        writable = err(e)
    return {"path": os.path.abspath(__file__), "append": writable, "uid": st.st_uid}


WRITE_DIRS = ["/", "/usr", "/usr/bin", "/etc", "/bin", "/lib", "/var", "/var/tmp", "/root", "/home",
              "/opt", "/run", "/tmp", "/workspace", "/dev", "/dev/shm", "/sys", "/proc"]


@fact("writable")
def _():
    out = {}
    for d in WRITE_DIRS:
        path = os.path.join(d, f".sbx-probe-{os.getpid()}")
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            os.close(fd)
            os.unlink(path)
            out[d] = "yes"
        except OSError as e:
            out[d] = err(e)
    # Existing files: the rootfs's own, and kernel knobs.
    for f in ("/etc/passwd", "/usr/bin/python3", "/proc/sys/kernel/hostname", "/proc/sys/vm/drop_caches",
              "/proc/sysrq-trigger", "/sys/kernel/uevent_helper"):
        try:
            fd = os.open(f, os.O_WRONLY)
            os.close(fd)
            out[f] = "yes"
        except OSError as e:
            out[f] = err(e)
    return out


@fact("dev")
def _():
    out = {}
    for n in sorted(os.listdir("/dev")):
        st = os.lstat(os.path.join("/dev", n))
        if stat.S_ISCHR(st.st_mode):
            out[n] = ["chr", os.major(st.st_rdev), os.minor(st.st_rdev)]
        elif stat.S_ISLNK(st.st_mode):
            out[n] = ["link", os.readlink(os.path.join("/dev", n))]
        elif stat.S_ISDIR(st.st_mode):
            out[n] = ["dir"]
        else:
            out[n] = ["other", stat.S_IFMT(st.st_mode)]
    return out


@fact("dev_works")
def _():
    out = {}
    with open("/dev/null", "wb") as f:
        out["null_write"] = f.write(b"x" * 10)
    with open("/dev/zero", "rb") as f:
        out["zero"] = f.read(4) == b"\0\0\0\0"
    with open("/dev/urandom", "rb") as f:
        out["urandom"] = len(f.read(16))
    try:
        with open("/dev/full", "wb", buffering=0) as f:
            f.write(b"x")
        out["full"] = "wrote"
    except OSError as e:
        out["full"] = err(e)
    return out


@fact("sys")
def _():
    if not os.path.isdir("/sys"):
        return {"exists": False}
    out = {"exists": True, "entries": sorted(os.listdir("/sys"))}
    for p in ("/sys/class/net", "/sys/fs/cgroup", "/sys/kernel"):
        out[p] = os.path.exists(p)
    return out


MASK = ["/proc/kcore", "/proc/keys", "/proc/timer_list", "/proc/sched_debug", "/proc/kallsyms",
        "/proc/acpi", "/proc/scsi", "/proc/cmdline", "/proc/sys/kernel/random/boot_id"]


@fact("proc_mask")
def _():
    out = {}
    for p in MASK:
        if not os.path.lexists(p):
            out[p] = {"exists": False}
            continue
        st = os.stat(p)
        e = {"exists": True, "dir": stat.S_ISDIR(st.st_mode)}
        if stat.S_ISCHR(st.st_mode):
            e["chr"] = [os.major(st.st_rdev), os.minor(st.st_rdev)]
        try:
            if e["dir"]:
                e["entries"] = len(os.listdir(p))
            else:
                with open(p, "rb") as f:
                    e["bytes"] = len(f.read(4096))
        except OSError as ex:
            e["open"] = err(ex)
        out[p] = e
    return out


@fact("host_paths")
def _():
    # None of the host's tree may show through; the caller passes paths it knows exist outside.
    return {p: os.path.exists(p) for p in sys.argv[1:]}


@fact("cgroup")
def _():
    return read("/proc/self/cgroup").strip().splitlines()


print(json.dumps(facts, sort_keys=True))
