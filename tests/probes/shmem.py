"""Runs INSIDE the sandbox: holds memory where RLIMIT_AS does not count it (pages a file or a
segment keeps while nothing maps them), N objects of M MiB each, and prints JSON: how much it
held, the error that stopped it, and how much the host's Shmem (/proc/meminfo, the host's: not
masked) rose meanwhile. Exits 0 when it ran, whatever the kernel answered.

Usage: shmem.py memfd|memfd_secret|posix_shm|sysv N MIB"""
import ctypes
import errno
import json
import os
import sys

way, n, mib = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
MiB = 1 << 20
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
libc.shmat.restype = ctypes.c_void_p
libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
libc.shmdt.argtypes = [ctypes.c_void_p]
IPC_PRIVATE, IPC_CREAT = 0, 0o1000
NR_MEMFD_SECRET = 447  # x86_64


def shmem_kib():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("Shmem:"):
                return int(line.split()[1])
    return 0


def check(ret):
    if ret == -1 or ret is None or ret == ctypes.c_void_p(-1).value:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return ret


def fill_fd(fd):
    chunk = b"\xa5" * MiB
    for _ in range(mib):
        os.write(fd, chunk)


def one(i):
    """One object of mib MiB, left holding its pages with nothing of ours mapping them."""
    if way == "memfd":
        fill_fd(os.memfd_create(f"hold{i}"))
    elif way == "posix_shm":
        import _posixshmem
        fill_fd(_posixshmem.shm_open(f"/hold{i}", os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600))
    elif way == "sysv":
        sid = check(libc.shmget(IPC_PRIVATE, ctypes.c_size_t(mib * MiB), IPC_CREAT | 0o600))
        addr = check(libc.shmat(sid, None, 0))
        ctypes.memset(addr, 0xa5, mib * MiB)
        libc.shmdt(ctypes.c_void_p(addr))  # the segment keeps its pages: no IPC_RMID
    elif way == "memfd_secret":
        import mmap
        fd = check(libc.syscall(ctypes.c_long(NR_MEMFD_SECRET), ctypes.c_long(0)))
        os.ftruncate(fd, mib * MiB)
        m = mmap.mmap(fd, mib * MiB)
        m.write(b"\xa5" * (mib * MiB))
        m.close()
    else:
        raise SystemExit(f"unknown way {way}")


before = shmem_kib()
held, error = 0, None
try:
    for i in range(n):
        one(i)
        held += mib
except OSError as e:
    error = errno.errorcode.get(e.errno, str(e.errno))
print(json.dumps({"way": way, "held_mib": held, "error": error, "shmem_rise_mib": (shmem_kib() - before) // 1024}))
