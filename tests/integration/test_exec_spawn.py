"""How pid 1 starts the code (init.c): clone(CLONE_VM | CLONE_VFORK), falling back to a plain
fork when the policy refuses that clone with an errno (sandboxd.policy(5), SECCOMP)."""
import sbx

CLONE_VM = 0x100


def test_code_starts_when_the_policy_refuses_clone_vm():
    # A policy without threads: every clone that shares memory fails with EPERM, pid 1's too.
    policy = sbx.weak_policy("no-clone-vm", "syscalls", r"allow clone when .*",
                             lambda line: f"{line}\nerrno EPERM clone when arg0 & {CLONE_VM} == {CLONE_VM}"
                                          "   # test: no threads")
    r = sbx.code("import threading\n"
                 "try:\n"
                 "    t = threading.Thread(target=print)\n"
                 "    t.start()\n"
                 "    t.join()\n"
                 "    print('thread started')\n"
                 "except RuntimeError:\n"
                 "    print('no thread')\n", policy=policy)
    assert r.rc == 0, r.describe()
    # The rule is in force (the code cannot start a thread), and the code ran all the same.
    assert r.stdout.strip() == "no thread", r.describe()


def test_exec_error_still_reported():
    # The exec result still comes back through the CLOEXEC pipe: a missing program is 127.
    r = sbx.run(("--", "/no/such/program"))
    assert r.rc == 127, r.describe()


def test_code_is_pid_2():
    # sandboxd(1): the code is pid 2 of its pid namespace, as in a forked call, although a thread
    # of pid 1 (the network namespace's) ran before it; every time, not just when the thread's
    # pid happened to be free again (it took pid 3 in about half the runs as an unprivileged user).
    for _ in range(20):
        r = sbx.run(("--", "/bin/sh", "-c", "echo $$ $PPID"), want_report=False)
        assert r.rc == 0, r.describe()
        assert r.stdout.split() == ["2", "1"], r.describe()
