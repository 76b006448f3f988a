"""Runs INSIDE the sandbox: calls raw syscalls (x86_64 numbers) through ctypes and prints
{"name": {"ret": R, "errno": "ENAME"|null}} for each.

Arguments are chosen so that the KERNEL would answer something other than the seccomp verdict
(EPERM for denied calls, ENOSYS for unlisted ones): a bad fd, a missing path, an invalid flag.
So when the tests see the expected errno it came from the filter, and a weakened policy shows
up as a different answer. No call here can do harm if it is let through: every one either fails
in the kernel or is a no-op (unshare(0), personality query, iopl(0)).

Usage: syscalls.py [NAME...]   (default: all)"""
import ctypes
import errno
import json
import os
import sys

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long

NOPATH = b"/nonexistent-sbx-probe"
buf = ctypes.create_string_buffer(4096)
BUF = ctypes.addressof(buf)
DEVNULL = os.open("/dev/null", os.O_RDWR)
MAXPID = 4194303  # never a live pid in a fresh pid namespace

AF_UNIX, AF_INET, AF_INET6, AF_NETLINK, AF_PACKET, AF_ALG, AF_VSOCK = 1, 2, 10, 16, 17, 38, 40
SOCK_STREAM, SOCK_DGRAM, SOCK_RAW = 1, 2, 3
CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x20000, 0x4000000, 0x8000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
CLONE_NEWCGROUP, CLONE_FS, SIGCHLD = 0x2000000, 0x200, 17
TIOCSTI, TIOCLINUX, FIONREAD = 0x5412, 0x541C, 0x541B


def p(x):
    return ctypes.c_char_p(x) if isinstance(x, bytes) else ctypes.c_long(x)


# name -> (syscall number, args). Comments say what the kernel itself would answer.
CALLS = {
    # namespaces group
    "unshare": (272, [0]),                                  # no-op success
    "unshare_newuser": (272, [CLONE_NEWUSER]),              # would create a user namespace
    "setns": (308, [-1, 0]),                                # EBADF
    "mount": (165, [0, NOPATH, 0, 0, 0]),                   # ENOENT
    "umount2": (166, [NOPATH, 0xFFFF]),                     # EINVAL
    "pivot_root": (155, [NOPATH, NOPATH]),                  # EPERM (capability) anyway
    "chroot": (161, [NOPATH]),                              # ENOENT
    "fsopen": (430, [0, 0]),                                # EPERM (capability) anyway
    "fsconfig": (431, [-1, 0, 0, 0, 0]),                    # EINVAL
    "fsmount": (432, [-1, 0xFFFF, 0]),                      # EINVAL
    "fspick": (433, [-1, 0, 0xFFFF]),                       # EINVAL/EPERM
    "move_mount": (429, [-1, 0, -1, 0, 0xFFFF]),            # EINVAL
    "open_tree": (428, [-1, 0, 0xFFFFFF]),                  # EINVAL
    "mount_setattr": (442, [-1, 0, 0xFFFF, 0, 0]),          # EINVAL
    # kernel-surface group
    "bpf": (321, [-1, 0, 0]),                               # EPERM/EINVAL
    "perf_event_open": (298, [0, 0, -1, -1, 0xFFFF]),       # EINVAL
    "userfaultfd": (323, [0xFFFF]),                         # EINVAL
    "io_uring_setup": (425, [0, 0]),                        # EFAULT/EINVAL
    "io_uring_enter": (426, [-1, 0, 0, 0, 0, 0]),           # EBADF
    "io_uring_register": (427, [-1, 0, 0, 0]),              # EBADF
    "keyctl": (250, [0xFFFF, 0, 0, 0, 0]),                  # EOPNOTSUPP
    "add_key": (248, [0, 0, 0, 0, 0]),                      # EFAULT
    "request_key": (249, [0, 0, 0, 0]),                     # EFAULT
    # introspection group
    "ptrace": (101, [16, MAXPID, 0, 0]),                    # ESRCH (PTRACE_ATTACH)
    "process_vm_readv": (310, [MAXPID, 0, 0, 0, 0, 1]),     # EINVAL
    "process_vm_writev": (311, [MAXPID, 0, 0, 0, 0, 1]),    # EINVAL
    "pidfd_getfd": (438, [-1, 0, 0]),                       # EBADF
    "kcmp": (312, [MAXPID, MAXPID, 0, 0, 0]),               # ESRCH
    "process_madvise": (440, [-1, 0, 0, 0, 0]),             # EBADF
    # host group
    "init_module": (175, [0, 0, 0]),                        # EPERM (capability) anyway
    "finit_module": (313, [-1, 0, 0]),                      # EPERM anyway
    "delete_module": (176, [0, 0]),                         # EPERM anyway
    "kexec_load": (246, [0, 0, 0, 0]),                      # EPERM anyway
    "kexec_file_load": (320, [-1, -1, 0, 0, 0]),            # EPERM anyway
    "reboot": (169, [0, 0, 0, 0]),                          # EPERM anyway
    "swapon": (167, [NOPATH, 0]),                           # EPERM anyway
    "swapoff": (168, [NOPATH]),                             # EPERM anyway
    "acct": (163, [0]),                                     # EPERM anyway
    "settimeofday": (164, [0, 0]),                          # EPERM anyway
    "clock_settime": (227, [1, 0]),                         # EINVAL (CLOCK_MONOTONIC)
    "clock_adjtime": (305, [0, 0]),                         # EFAULT
    "adjtimex": (159, [0]),                                 # EFAULT
    "sethostname": (170, [b"evil", 4]),                     # EPERM anyway
    "setdomainname": (171, [b"evil", 4]),                   # EPERM anyway
    "syslog": (103, [10, 0, 0]),                            # EPERM (dmesg_restrict) or size
    "vhangup": (153, []),                                   # EPERM anyway
    "quotactl": (179, [0xFFFFFFFF, 0, 0, 0]),               # EINVAL
    "iopl": (172, [0]),                                     # 0 / ENOSYS
    "ioperm": (173, [0, 0, 0]),                             # 0 / ENOSYS
    "open_by_handle_at": (304, [-1, 0, 0]),                 # EPERM anyway
    "name_to_handle_at": (303, [-100, NOPATH, BUF, BUF + 2048, 0]),  # ENOENT
    # mknod and mknodat make FIFOs only (S_IFIFO, 0o010000, the file type in mode & 0o170000):
    # the kernel answers ENOENT to a FIFO; every other type must get EPERM from the filter, with
    # high bits set too (the kernel reads mode as 16 bits). `mknod` and `mknodat` are FIFOs.
    "mknod": (133, [NOPATH + b"/fifo", 0o10600, 0]),        # ENOENT
    "mknodat": (259, [-100, NOPATH + b"/fifo", 0o10600, 0]),  # ENOENT
    **{f"{call}_{kind}": (nr, [*pre, NOPATH + b"/node", mode, 0x0103])
       for call, nr, pre in (("mknod", 133, []), ("mknodat", 259, [-100]))
       for kind, mode in (("chr", 0o20600), ("blk", 0o60600), ("reg", 0o100600), ("untyped", 0o600),
                          ("sock", 0o140600), ("dir", 0o40700), ("fifo_chr", 0o30600),
                          ("chr_highbits", (1 << 32) | 0o20600), ("chr_bit16", 0o220600))},
    "fanotify_init": (300, [0, 0]),                         # EPERM anyway
    "personality": (135, [0xFFFFFFFF]),                     # query: the current persona
    "setxattr": (188, [NOPATH, b"user.x", BUF, 1, 0]),      # ENOENT
    "lsetxattr": (189, [NOPATH, b"user.x", BUF, 1, 0]),     # ENOENT
    "fsetxattr": (190, [-1, b"user.x", BUF, 1, 0]),         # EBADF
    "removexattr": (197, [NOPATH, b"user.x"]),              # ENOENT
    "lremovexattr": (198, [NOPATH, b"user.x"]),             # ENOENT
    "fremovexattr": (199, [-1, b"user.x"]),                 # EBADF
    # process group: clone only without namespace flags; clone3 ENOSYS
    "clone_newuser_fs": (56, [CLONE_NEWUSER | CLONE_FS, 0, 0, 0, 0]),  # EINVAL
    "clone_newns": (56, [CLONE_NEWNS | SIGCHLD, 0, 0, 0, 0]),          # EPERM (capability)
    "clone_newnet": (56, [CLONE_NEWNET | SIGCHLD, 0, 0, 0, 0]),        # EPERM (capability)
    "clone_newcgroup_fs": (56, [CLONE_NEWCGROUP | CLONE_NEWUSER | CLONE_FS, 0, 0, 0, 0]),  # EINVAL
    "clone3": (435, [0, 0]),                                # EINVAL
    # ioctl group: TIOCSTI/TIOCLINUX denied (on /dev/null the kernel says ENOTTY)
    "ioctl_tiocsti": (16, [DEVNULL, TIOCSTI, BUF]),
    "ioctl_tiocsti_highbits": (16, [DEVNULL, (1 << 32) | TIOCSTI, BUF]),
    "ioctl_tiocsti_highbits2": (16, [DEVNULL, (0xFFFFFFFF << 32) | TIOCSTI, BUF]),
    "ioctl_tioclinux": (16, [DEVNULL, TIOCLINUX, BUF]),
    "ioctl_tioclinux_highbits": (16, [DEVNULL, (1 << 32) | TIOCLINUX, BUF]),
    "ioctl_fionread_devnull": (16, [DEVNULL, FIONREAD, BUF]),  # ENOTTY: ioctl itself works
    # network group
    "socket_unix": (41, [AF_UNIX, SOCK_STREAM, 0]),
    "socket_inet": (41, [AF_INET, SOCK_DGRAM, 0]),
    "socket_inet6": (41, [AF_INET6, SOCK_DGRAM, 0]),
    "socket_netlink": (41, [AF_NETLINK, SOCK_RAW, 0]),      # works in the kernel without caps
    "socket_netlink_highbits": (41, [(1 << 32) | AF_NETLINK, SOCK_RAW, 0]),
    "socket_packet": (41, [AF_PACKET, SOCK_RAW, 0]),
    "socket_alg": (41, [AF_ALG, 5, 0]),
    "socket_vsock": (41, [AF_VSOCK, SOCK_STREAM, 0]),
    "socketpair_unix": (53, [AF_UNIX, SOCK_STREAM, 0, BUF]),
    "socketpair_inet": (53, [AF_INET, SOCK_STREAM, 0, BUF]),  # EOPNOTSUPP
    # not named anywhere in the policy: seccomp_default (ENOSYS); the kernel would succeed
    "modify_ldt": (154, [0, BUF, 16]),                      # 0
    "getcpu": (309, [BUF, BUF + 8, 0]),                     # 0
    "get_mempolicy": (239, [0, 0, 0, 0, 0]),                # 0
    "set_mempolicy": (238, [0, 0, 0]),                      # 0 (MPOL_DEFAULT)
    "vmsplice": (278, [-1, 0, 0, 0]),                       # EBADF
    "seccomp": (317, [2, 0, BUF]),                          # SECCOMP_GET_ACTION_AVAIL: EFAULT/0
    "pkey_alloc": (330, [0xFFFF, 0]),                       # EINVAL
    "landlock_create_ruleset": (444, [0, 0, 1]),            # ABI version
    "memfd_secret": (447, [0xFFFF]),                        # EINVAL
    "mbind": (237, [0, 0, 0, 0, 0, 0]),                     # 0/EINVAL
    "sysfs": (139, [3]),                                    # number of filesystem types
    "ustat": (136, [0, BUF]),                               # EINVAL
    "nr_1000": (1000, []),                                  # ENOSYS (not a syscall at all)
    # allowed: must work
    "getpid": (39, []),
}


def call(nr, args):
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), *[p(a) for a in args])
    e = ctypes.get_errno() if r == -1 else 0
    if nr == 56 and r == 0:  # clone let through: this is the new child; leave at once
        os._exit(0)
    if nr == 56 and r > 0:
        os.waitpid(r, 0)
        return "child-created", 0
    return r, e


def isolated(fn):
    """Run fn() in a forked child so that a call the filter wrongly lets through (unshare,
    personality...) cannot change what the next call sees; returns fn's dict."""
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(rfd)
        try:
            res = fn()
        except BaseException as ex:  # noqa: BLE001
            res = {"ret": "exception", "errno": repr(ex)}
        os.write(wfd, json.dumps(res).encode())
        os._exit(0)
    os.close(wfd)
    data = b""
    while chunk := os.read(rfd, 65536):
        data += chunk
    os.close(rfd)
    _, st = os.waitpid(pid, 0)
    if not data:
        return {"ret": "died", "errno": None, "status": os.waitstatus_to_exitcode(st)}
    return json.loads(data)


def one(name):
    if name == "clone_newuser_real":  # clone(CLONE_NEWUSER|SIGCHLD): a real namespace if allowed
        nr, args = 56, [CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0]
    elif name == "fork":
        pid = os.fork()
        if pid == 0:
            os._exit(7)
        _, st = os.waitpid(pid, 0)
        return {"ret": os.waitstatus_to_exitcode(st), "errno": None}
    else:
        nr, args = CALLS[name]
    r, e = call(nr, args)
    return {"ret": r, "errno": errno.errorcode.get(e, str(e)) if e else None}


def main():
    names = sys.argv[1:] or list(CALLS) + ["clone_newuser_real", "fork"]
    out = {name: isolated(lambda n=name: one(n)) for name in names}
    print(json.dumps(out, sort_keys=True))


main()
