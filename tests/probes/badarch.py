"""Runs INSIDE the sandbox: makes one syscall through another ABI. The policy's seccomp_badarch
is `kill`, so the process must die of SIGSYS (sandboxd exits 128+31 = 159) before printing.

Usage: badarch.py int80|x32|sysenter32
  int80: i386 getpid via `int 0x80` from mmap'd shellcode
  x32:   x32 getpid, nr 39 | __X32_SYSCALL_BIT (0x40000000), through libc's syscall()"""
import ctypes
import mmap
import sys

mode = sys.argv[1]
if mode == "int80":
    # mov eax, 20 (i386 getpid); int 0x80; ret
    code = bytes([0xB8, 0x14, 0, 0, 0, 0xCD, 0x80, 0xC3])
    page = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    page.write(code)
    fn = ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(page)))
    r = fn()
elif mode == "x32":
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    r = libc.syscall(ctypes.c_long(0x40000000 | 39))
else:
    sys.exit(f"unknown mode {mode}")
print(f"SURVIVED {mode}: returned {r}", flush=True)
