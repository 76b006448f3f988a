"""The compiled seccomp filter cache is never trusted when a sandbox could have written it
(issue #12, item 1): a file forged with a correct checksum, from inside a sandbox given
--bind-rw of the cache directory or by the cache's owner, is recompiled, not installed.
Run as root (the cache is out of the sandbox's reach by DAC) and as the unprivileged user (the
sandbox is the cache's owner: only the HMAC key in the user's keyring tells the files apart)."""
import hashlib
import os
import struct

import pytest

import sbx
from sbx import code

pytestmark = pytest.mark.security


BPF_RET_K, SECCOMP_RET_ALLOW = 0x06, 0x7FFF0000


def forge_source(cache_dst):
    """Code that rewrites every cached filter as one `allow everything` instruction, in the
    file's own format (magic, lengths, program, sha256 hex of the rest), as the host's reader
    checked it before HMAC keys. Prints how many it forged."""
    return f"""
import hashlib, os, struct
n = 0
try:
    names = [f for f in os.listdir({cache_dst!r}) if f.endswith('.bpf')]
except OSError:
    names = []
for f in names:
    p = os.path.join({cache_dst!r}, f)
    try:
        magic = open(p, 'rb').read(8)
        body = magic + struct.pack('<II', 1, 0) + struct.pack('<HBBI', {BPF_RET_K}, 0, 0, {SECCOMP_RET_ALLOW})
        with open(p + '.new', 'wb') as o:
            o.write(body + hashlib.sha256(body).hexdigest().encode())
        os.rename(p + '.new', p)
        n += 1
    except OSError:
        pass
print(n)
"""


def forge_on_host(cache):
    """The same forgery, written by the cache's owner itself: only a key can tell it apart."""
    n = 0
    for f in os.listdir(cache):
        if f.endswith(".bpf"):
            p = cache / f
            magic = p.read_bytes()[:8]
            body = magic + struct.pack("<II", 1, 0) + struct.pack("<HBBI", BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW)
            p.write_bytes(body + hashlib.sha256(body).hexdigest().encode())
            n += 1
    return n


def denied_syscall_still_denied(env):
    r = sbx.run("syscalls", "keyctl", env=env, want_report=False)
    assert r.rc == 0, r.describe()
    assert r.json()["keyctl"]["errno"] == "EPERM", f"seccomp was not enforced: {r.json()}"


def cache_env(host_dir):
    cache = host_dir / "cache"
    env = dict(os.environ, SANDBOXD_CACHE_DIR=str(cache))
    return cache, env


def test_seccomp_cache_forged_from_inside_a_sandbox(host_dir):
    """--bind-rw of the cache directory: unprivileged, the sandbox is the cache's owner and
    rewrites it; root, the cache is out of its reach. Either way the next run is filtered."""
    cache, env = cache_env(host_dir)
    r = code("pass", env=env, want_report=False)
    assert r.rc == 0, r.describe()
    cached = [f for f in os.listdir(cache) if f.endswith(".bpf")]
    if not cached:
        sbx.need(False, "no seccomp cache on this host (no kernel keyring for the user)", security=False)
    r = code(forge_source("/workspace/cache"), opts=["--bind-rw", f"{cache}:/workspace/cache"], env=env,
             want_report=False)
    assert r.rc == 0, r.describe()
    forged = int(r.stdout.split()[-1])
    if sbx.IS_ROOT:
        assert forged == 0, "root's cache was writable from inside the sandbox"
    else:
        assert forged >= 1, "the forgery did not happen: the test would prove nothing"
    denied_syscall_still_denied(env)


def test_seccomp_cache_forged_by_its_owner_is_not_trusted(host_dir):
    """A checksum anyone can compute is no proof: a file forged with the right sha256 by a writer
    without the key is recompiled, not installed."""
    cache, env = cache_env(host_dir)
    r = code("pass", env=env, want_report=False)
    assert r.rc == 0, r.describe()
    if not forge_on_host(cache):
        sbx.need(False, "no seccomp cache on this host (no kernel keyring for the user)", security=False)
    denied_syscall_still_denied(env)


def test_seccomp_cache_is_used(host_dir):
    """The cache still works: one file per policy, written once, then read (not rewritten)."""
    cache, env = cache_env(host_dir)
    assert code("pass", env=env, want_report=False).rc == 0
    files = [f for f in os.listdir(cache) if f.endswith(".bpf")]
    if not files:
        sbx.need(False, "no seccomp cache on this host (no kernel keyring for the user)", security=False)
    assert len(files) == 1 and not [f for f in os.listdir(cache) if not f.endswith(".bpf")]
    st = os.stat(cache / files[0])
    assert st.st_mode & 0o077 == 0 and st.st_uid == os.geteuid()
    assert code("pass", env=env, want_report=False).rc == 0
    assert os.stat(cache / files[0]).st_ino == st.st_ino, "a valid cache file was rewritten"


KEYCTL = 250  # x86_64
KEYCTL_JOIN_SESSION_KEYRING, KEYCTL_LINK, KEYCTL_INVALIDATE, KEYCTL_SEARCH = 1, 8, 21, 10
KEY_SPEC_SESSION_KEYRING, KEY_SPEC_USER_KEYRING = -3, -4
SECRET = b"sandboxd-test:secret"


def _keyctl(*args):
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    conv = [ctypes.c_char_p(a) if isinstance(a, bytes) or a is None else ctypes.c_long(a) for a in args]
    return libc.syscall(ctypes.c_long(KEYCTL), *conv)


def _login_session():
    """preexec: a session keyring that links the user's keyring, as pam_keyinit gives a login."""
    if _keyctl(KEYCTL_JOIN_SESSION_KEYRING, None) < 0 or \
            _keyctl(KEYCTL_LINK, KEY_SPEC_USER_KEYRING, KEY_SPEC_SESSION_KEYRING) < 0:
        os._exit(97)


FIND_SECRET = f"""
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
found = [libc.syscall(ctypes.c_long({KEYCTL}), ctypes.c_long({KEYCTL_SEARCH}), ctypes.c_long(ring),
                      ctypes.c_char_p(b"user"), ctypes.c_char_p({SECRET!r}), ctypes.c_long(0)) >= 0
         for ring in ({KEY_SPEC_SESSION_KEYRING}, {KEY_SPEC_USER_KEYRING})]
print(*found)
"""


def test_a_policy_that_allows_keyrings_reaches_no_host_keyring(host_dir):
    """Under a policy that allows keyctl, the code gets a session keyring of its own: a login's
    (which links the user's keyring, where sandboxd keeps its cache key) stays out of reach. A
    stand-in secret in the user's keyring cannot be found; and nothing is cached for the policy."""
    import platform
    import subprocess
    sbx.need(platform.machine() == "x86_64", "keyctl syscall number is x86_64's")
    cache, env = cache_env(host_dir)
    assert code("pass", env=env, want_report=False).rc == 0
    if not os.path.isdir(cache) or not os.listdir(cache):
        sbx.need(False, "no seccomp cache on this host (no kernel keyring for the user)", security=False)
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    key = libc.syscall(ctypes.c_long(248), ctypes.c_char_p(b"user"), ctypes.c_char_p(SECRET),  # add_key
                       ctypes.c_char_p(b"s3cret"), ctypes.c_long(6), ctypes.c_long(KEY_SPEC_USER_KEYRING))
    assert key >= 0, f"add_key: errno {ctypes.get_errno()}"
    try:
        pol = sbx.weak_policy("keyrings", "syscalls", r"errno EPERM keyctl add_key request_key.*",
                              "allow keyctl add_key request_key")
        before = set(os.listdir(cache))
        # The host side of the test reaches it through such a session: the test proves something.
        probe = subprocess.run(["/usr/bin/python3", "-c", FIND_SECRET], capture_output=True, text=True,
                               preexec_fn=_login_session)
        assert probe.stdout.split() == ["True", "True"], probe
        p = subprocess.run(sbx.exec_cmd(("-c", FIND_SECRET), policy=pol), capture_output=True, text=True,
                           env=env, preexec_fn=_login_session, timeout=60)
        assert p.returncode == 0, p
        assert p.stdout.split() == ["False", "False"], f"the code found the user's secret: {p}"
        assert set(os.listdir(cache)) == before, "a filter was cached for a keyctl-allowing policy"
    finally:
        _keyctl(KEYCTL_INVALIDATE, key)
    denied_syscall_still_denied(env)


def _named_filters(cache):
    return {f for f in os.listdir(cache) if f.endswith(".bpf")}


SWAP_SOURCE = """
import os, shutil, sys
src, dst = sys.argv[1:]
try:
    shutil.copyfile(src, dst + '.new')
    os.rename(dst + '.new', dst)
    print('swapped')
except OSError as e:
    print('refused', e.errno)
"""


@pytest.mark.parametrize("writer", ["sandbox", "owner"])
def test_seccomp_cache_swapped_between_policies_is_not_used(host_dir, writer):
    """Issue #34, item 3: one policy's authenticated filter copied over another policy's name, by
    a sandbox given --bind-rw of the cache (under the looser policy, as `--policy ci --bind-rw
    ~/.cache:...` would) or by the cache's owner. What the key authenticates names the policy,
    architecture, libseccomp and variant the filter was compiled from: the next run under the
    stricter policy recompiles it, and a call that policy denies stays denied."""
    cache, env = cache_env(host_dir)
    loose = sbx.weak_policy("cache-swap", "syscalls", r"errno EPERM ptrace .*", _allow_line)
    r = sbx.run("syscalls", "ptrace", policy=loose, env=env, want_report=False)
    assert r.rc == 0, r.describe()
    # The looser policy lets ptrace through (the kernel answers ESRCH): the swap can prove something.
    assert r.json()["ptrace"]["errno"] == "ESRCH", r.json()
    if not os.path.isdir(cache) or not _named_filters(cache):
        sbx.need(False, "no seccomp cache on this host (no kernel keyring for the user)", security=False)
    (loose_name,) = _named_filters(cache)
    denied_syscall_still_denied(env)  # the default policy's filter, cached under its own name
    (strict_name,) = _named_filters(cache) - {loose_name}
    loose_bytes = (cache / loose_name).read_bytes()
    if writer == "owner":
        (cache / strict_name).write_bytes(loose_bytes)
    else:
        r = sbx.run(("-c", SWAP_SOURCE), f"/workspace/c/{loose_name}", f"/workspace/c/{strict_name}",
                    policy=loose, opts=["--bind-rw", f"{cache}:/workspace/c"], env=env, want_report=False)
        assert r.rc == 0, r.describe()
        if sbx.IS_ROOT:
            assert r.stdout.split()[0] == "refused", "root's cache was writable from inside the sandbox"
        else:
            assert r.stdout.split()[0] == "swapped", \
                f"the swap did not happen: the test would prove nothing\n{r.describe()}"
    r = sbx.run("syscalls", "ptrace", env=env, want_report=False)
    assert r.rc == 0, r.describe()
    assert r.json()["ptrace"]["errno"] == "EPERM", \
        f"the default policy ran with another policy's filter: {r.json()}"
    assert (cache / strict_name).read_bytes() != loose_bytes, "the swapped file was kept"
    denied_syscall_still_denied(env)


def _allow_line(line):
    return line.replace("errno EPERM", "allow", 1)
