# SPDX-License-Identifier: Apache-2.0
"""The README's demo: what code inside a sandboxd sandbox can and cannot do."""
import os
import socket
import sys

print(f"Python {sys.version.split()[0]} as uid {os.getuid()} in {os.getcwd()} on host `{socket.gethostname()}`")
print("network interfaces:", [l.split(":")[0].strip() for l in open("/proc/net/dev").readlines()[2:]])
print("processes visible:", sorted(int(p) for p in os.listdir("/proc") if p.isdigit()))
for what, attempt in [
    ("write to the root filesystem", lambda: open("/etc/passwd", "a")),
    ("create a user namespace", lambda: os.unshare(os.CLONE_NEWUSER)),
    ("open a raw netlink socket", lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW)),
]:
    try:
        attempt()
        print(f"  {what}: ALLOWED (unexpected)")
    except OSError as e:
        print(f"  {what}: denied ({e.strerror})")
with open("/workspace/out.txt", "w") as f:
    f.write("scratch space is writable and disappears with the sandbox\n")
print("wrote /workspace/out.txt; exiting with status 3")
sys.exit(3)
