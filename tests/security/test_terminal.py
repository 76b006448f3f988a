"""The caller's terminal (issue 12, item 6): when the sandbox's stdin and stdout are the caller's
terminal, the code may read it and set its modes, and nothing more.

Each test gives a real pty's slave (pty.openpty on the host) to `sandboxd exec` as stdin and
stdout; the code reports on stderr. A denied ioctl fails with EPERM from seccomp. Run on /dev/null
too, where the kernel itself would say ENOTTY, so EPERM there can only be the filter's; and with
high bits set in the command, which the kernel ignores (its cmd is an unsigned int)."""
import fcntl
import json
import os
import pty
import struct
import subprocess
import termios

import pytest

import sbx

pytestmark = pytest.mark.security

# Terminal ioctls the shipped policies deny (policy/syscalls.inc, group ioctl), and one member of
# each denied range: the console's KD* (0x4Bxx) and the virtual terminals' VT* (0x56xx).
DENIED = {
    "TIOCSTI": 0x5412, "TIOCLINUX": 0x541C, "TIOCSETD": 0x5423, "TIOCSCTTY": 0x540E,
    "TIOCSPGRP": 0x5410, "TIOCSWINSZ": 0x5414, "TIOCEXCL": 0x540C, "TIOCNXCL": 0x540D,
    "TIOCCONS": 0x541D, "TIOCVHANGUP": 0x5437, "TIOCSIG": 0x40045436, "TIOCPKT": 0x5420,
    "TIOCSPTLCK": 0x40045431, "TIOCGPTPEER": 0x5441, "TIOCSLCKTRMIOS": 0x5457, "TIOCMSET": 0x5418,
    "TIOCMBIS": 0x5416, "TIOCMBIC": 0x5417, "TIOCSBRK": 0x5427, "TIOCCBRK": 0x5428,
    "TIOCSSOFTCAR": 0x541A, "TIOCSSERIAL": 0x541F, "TIOCSERCONFIG": 0x5453, "TIOCSRS485": 0x542F,
    "TIOCSISO7816": 0xC0285443, "KDGKBTYPE": 0x4B33, "KDSETMODE": 0x4B3A, "KDSKBSENT": 0x4B49,
    "VT_GETSTATE": 0x5603, "VT_ACTIVATE": 0x5606,
}

PROBE = r"""
import ctypes, errno, fcntl, json, os, struct, sys, termios
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
buf = ctypes.create_string_buffer(64)   # zeros: N_TTY for TIOCSETD, a 0x0 winsize...

def raw(fd, cmd, arg=None):
    # The raw syscall, so that the high bits of cmd reach the filter unchanged.
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(16), ctypes.c_long(fd), ctypes.c_ulong(cmd), arg if arg is not None else buf)
    return "ok" if r >= 0 else errno.errorcode[ctypes.get_errno()]

denied = json.loads(sys.argv[1])
null = os.open("/dev/null", os.O_RDWR)
out = {"tty": os.isatty(0) and os.isatty(1), "null": {}, "tty_denied": {}, "allowed": {}}
for name, cmd in denied.items():
    for hi in (0, 1 << 32, 0xFFFFFFFF << 32):
        out["null"][f"{name}|{hi:#x}"] = raw(null, cmd | hi)
# On the caller's terminal itself: those that would change it for the host's processes.
ws = struct.pack("HHHH", 50, 132, 0, 0)
out["tty_denied"]["TIOCSWINSZ"] = raw(0, denied["TIOCSWINSZ"], ctypes.c_char_p(ws))
out["tty_denied"]["TIOCSETD"] = raw(0, denied["TIOCSETD"])
out["tty_denied"]["TIOCEXCL"] = raw(1, denied["TIOCEXCL"] | 1 << 32)
out["tty_denied"]["TIOCSCTTY"] = raw(0, denied["TIOCSCTTY"], ctypes.c_long(0))

def step(name, fn):
    try:
        r = fn()
        out["allowed"][name] = "ok" if r is None or not isinstance(r, str) else r
    except OSError as e:
        out["allowed"][name] = errno.errorcode.get(e.errno, str(e.errno))

saved = termios.tcgetattr(0)
step("TCGETS", lambda: termios.tcgetattr(0))
raw_mode = list(saved)
raw_mode[3] &= ~(termios.ECHO | termios.ICANON)
step("TCSETS", lambda: termios.tcsetattr(0, termios.TCSANOW, raw_mode))
step("TCSETSW", lambda: termios.tcsetattr(0, termios.TCSADRAIN, raw_mode))
step("TCSETSF", lambda: termios.tcsetattr(0, termios.TCSAFLUSH, saved))   # what getpass does
step("raw_mode_seen", lambda: "ok" if termios.tcgetattr(0)[3] == saved[3] else "mode not restored")
step("TIOCGWINSZ", lambda: struct.unpack("HHHH", fcntl.ioctl(1, termios.TIOCGWINSZ, b"\0" * 8))[:2] == (24, 80)
     or "wrong size")
step("FIONREAD", lambda: fcntl.ioctl(0, termios.FIONREAD, b"\0" * 4))
step("FIONBIO", lambda: (fcntl.ioctl(0, termios.FIONBIO, struct.pack("i", 1)),
                         fcntl.ioctl(0, termios.FIONBIO, struct.pack("i", 0))))
step("tcdrain", lambda: termios.tcdrain(1))
step("tcflush", lambda: termios.tcflush(0, termios.TCIFLUSH))
pg = raw(0, termios.TIOCGPGRP)   # no controlling terminal: ENOTTY from the kernel, not the filter
out["allowed"]["TIOCGPGRP"] = "ok" if pg in ("ok", "ENOTTY") else pg
sys.stderr.write(json.dumps(out) + "\n")
"""


def run_on_pty(src, *args):
    """Run src with a fresh pty's slave as stdin and stdout (24x80); returns (result, facts,
    master, slave). The caller closes master and slave."""
    master, slave = pty.openpty()
    fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    cmd = sbx.exec_cmd(("-c", src), args)
    p = subprocess.run(cmd, stdin=slave, stdout=slave, stderr=subprocess.PIPE, timeout=60)
    res = sbx.Result(cmd, p.returncode, b"", p.stderr, 0.0)
    facts = None
    for line in reversed(res.stderr.splitlines()):
        if line.startswith("{"):
            facts = json.loads(line)
            break
    return res, facts, master, slave


def test_terminal_ioctls():
    res, facts, master, slave = run_on_pty(PROBE, json.dumps(DENIED))
    try:
        assert res.rc == 0 and facts, res.describe()
        assert facts["tty"], "the probe did not get the pty as stdin and stdout"
        bypassed = {k: v for k, v in facts["null"].items() if v != "EPERM"}
        assert not bypassed, f"denied terminal ioctls that reached the kernel (want EPERM): {bypassed}"
        assert facts["tty_denied"] == {k: "EPERM" for k in facts["tty_denied"]}, facts["tty_denied"]
        assert facts["allowed"] == {k: "ok" for k in facts["allowed"]}, \
            f"ioctls a program needs must keep working: {facts['allowed']}"
        # And from the host: the terminal is as it was.
        rows, cols = struct.unpack("HHHH", fcntl.ioctl(master, termios.TIOCGWINSZ, b"\0" * 8))[:2]
        assert (rows, cols) == (24, 80), "the code resized the caller's terminal"
        ldisc = struct.unpack("i", fcntl.ioctl(slave, 0x5424, b"\0" * 4))[0]  # TIOCGETD
        assert ldisc == 0, f"line discipline changed to {ldisc}"
        excl = struct.unpack("i", fcntl.ioctl(slave, 0x80045440, b"\0" * 4))[0]  # TIOCGEXCL
        assert excl == 0, "the code put the caller's terminal in exclusive mode"
    finally:
        fcntl.ioctl(slave, termios.TIOCNXCL)
        os.close(master)
        os.close(slave)
