"""Root with a container's capabilities: Docker's default set (no CAP_SYS_ADMIN, no
CAP_SYS_PTRACE), made here with setpriv's bounding set instead of a container. sandboxd as that
root must still build a full sandbox: it writes the id maps and joins the sandbox's user
namespace as the namespace's owner (the sandbox's host id), never through capabilities it lacks.
tests/docker runs the same in a real container."""
import json
import os
import shutil
import subprocess

import pytest

import sbx

# Docker's default capabilities (moby oci/caps/defaults.go), as setpriv --bounding-set says them.
DOCKER_CAPS = ("chown", "dac_override", "fsetid", "fowner", "mknod", "net_raw", "setgid", "setuid",
               "setfcap", "setpcap", "net_bind_service", "sys_chroot", "kill", "audit_write")

PROBE = ("import json, os\n"
         "print(json.dumps({'uid': os.getuid(), 'net': sorted(l.split(':')[0].strip() for l in "
         "open('/proc/net/dev').read().splitlines()[2:]), 'answer': 6 * 7,\n"
         " 'budgets': [int(open('/proc/sys/user/max_' + k).read()) for k in ('user_namespaces', "
         "'inotify_instances')]}))")
# The policies' user namespace budgets (namespaces, inotify_instances), which pid 1's network
# namespace thread writes from inside the user namespace (no capability outside it needed).
BUDGETS = {"default": [2, 16], "ci": [2, 32]}


def container_root(*opts, code=PROBE):
    sbx.require_sandboxd()
    sbx.root_only("a container's root is root without CAP_SYS_ADMIN and CAP_SYS_PTRACE")
    setpriv = shutil.which("setpriv")
    sbx.need(setpriv is not None, "setpriv (util-linux) is missing")
    cmd = [setpriv, "--bounding-set", "-all," + ",".join("+" + c for c in DOCKER_CAPS), "--",
           *sbx.exec_cmd(("-c", code), opts=opts)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("policy", ["default", "ci"])
def test_exec_as_root_without_sys_admin_and_sys_ptrace(policy):
    p = container_root("--policy", policy)
    assert p.returncode == 0, p.stderr
    facts = json.loads(p.stdout.strip().splitlines()[-1])
    # The sandbox's own identity and an empty network namespace (loopback only), as everywhere.
    assert facts == {"uid": 1000, "net": ["lo"], "answer": 42, "budgets": BUDGETS[policy]}, facts


def test_limits_hold_as_container_root():
    """The pids budget still binds (the limit is enforced, not just the start)."""
    p = container_root("--policy", "default", code=(
        "import os\nn = 0\ntry:\n    while n < 1000:\n        if os.fork() == 0:\n            import time; time.sleep(60)\n"
        "        n += 1\nexcept OSError as e:\n    print('stopped', n, e.errno)\n"))
    assert p.returncode == 0, p.stderr
    words = p.stdout.split()
    assert words[0] == "stopped" and int(words[1]) < 128, p.stdout
