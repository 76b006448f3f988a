# Sourced by tests/run: the cgroup subset (tests/cgroup), natively (as the caller: on this hybrid
# host, root takes the v1 path) and on pure cgroup v2 inside the test VM (tests/vm/run +
# tests/vm/cgroup-suite) as root, as `sbxtest` with a delegated cgroup, and as `sbxtest` without
# one (the shipped default must refuse); and in the VM on systemd's hybrid v1 layout, cpu and
# cpuacct co-mounted (tests/vm/run --cgroup-v1), as root. Adds to passed/failed/skipped from the
# junit xml files.
# Needs from tests/run: repo, py, rundir, sandboxd, rootfs, common_env, ci, note, fail, junit_totals,
# pytest_args. SANDBOXD_SKIP_VM=1 skips the VM runs (an error when CI=true).
# A VM that cannot start (`tests/vm/run --probe` fails) is one skip per VM run, with the reason;
# with CI=true it is a failure.

# shellcheck disable=SC2154 # the variables tests/run defines (see above)

# cg_count LABEL XML RC: add a junit file's totals; a non-zero RC with no failing test (pytest
# crashed, the VM died or timed out) is a failure of its own. Exit status 5 is "no tests selected".
cg_count() {
  local label=$1 xml=$2 rc=$3 counts p f s
  if [ ! -s "$xml" ]; then
    fail "$label: no results (exit $rc; crashed, timed out or could not start)"
    return
  fi
  counts=$(junit_totals "$xml" "$label") || { fail "$label: cannot read $xml"; return; }
  read -r p f s <<<"$counts"
  passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
  note "$label: $p passed, $f failed, $s skipped"
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 5 ] && [ "$f" -eq 0 ]; then fail "$label: exited $rc"; fi
}

if [ -n "${py:-}" ] && want cgroup; then
  cg_label="cgroup native as $(id -un)"
  mkdir -p "$rundir/cgroup-native/tmp" "$rundir/cgroup-native/work"
  cg_t0=$SECONDS
  env -i "${common_env[@]}" HOME="$rundir/cgroup-native" TMPDIR="$rundir/cgroup-native/tmp" \
    SANDBOXD_TEST_WORK="$rundir/cgroup-native/work" SANDBOXD_SHIPPED_POLICY_DIR="$repo/policy" \
    SANDBOXD_POLICY_DIR="$repo/policy" SANDBOXD_POLICY_SRC="$repo/policy" \
    "$py" -m pytest -p no:cacheprovider --rootdir "$repo/tests" --confcutdir "$repo/tests" -q -rfEs \
      --junitxml="$rundir/cgroup-native.xml" "${pytest_args[@]}" "$repo/tests/cgroup"
  cg_count "$cg_label ($((SECONDS - cg_t0)) s)" "$rundir/cgroup-native.xml" $?
fi

# ------------------------------------------------------------------ in the VM (pure cgroup v2)
# USER:VM-RUN OPTION:CGROUP-SUITE MODE. The last is cgroup v1 as systemd lays it out (cpu,cpuacct
# co-mounted), which this host's separate cpu and cpuacct hierarchies cannot show natively.
cg_vm_runs=("root::" "sbxtest:--delegate:" "sbxtest::--refusal" "root:--cgroup-v1:--v1")
# tests/run's whole run makes them in its second lane (cg_skip_vm=1 here, then cgroup-vm there).
if [ "${cg_skip_vm:-0}" = 1 ] || ! want_cgroup_vm; then
  :
elif [ "${SANDBOXD_SKIP_VM:-0}" = 1 ] && [ "$ci" != true ]; then
  note "cgroup VM runs skipped (SANDBOXD_SKIP_VM=1)"
  skipped=$((skipped + ${#cg_vm_runs[@]}))
elif [ -z "${py:-}" ]; then
  : # already counted as a failure by tests/run
else
  [ "${SANDBOXD_SKIP_VM:-0}" = 1 ] && fail "SANDBOXD_SKIP_VM=1 is not allowed when CI=true"
  vm_env=("${common_env[@]}" HOME="$rundir" SANDBOXD_SHIPPED_POLICY_DIR="$repo/policy")
  for v in VM_QEMU VM_ACCEL VM_CPU VM_CACHE VM_BUSYBOX; do [ -n "${!v:-}" ] && vm_env+=("$v=${!v}"); done
  vm_rc=0
  vm_why=$(cd "$repo" && env -i "${vm_env[@]}" "$repo/tests/vm/run" --probe 2>&1) || vm_rc=$?
  if [ "$vm_rc" -ne 0 ]; then
    vm_why=$(printf '%s\n' "${vm_why:-tests/vm/run --probe exited $vm_rc}" | tail -n 1)
    if [ "$ci" = true ]; then
      fail "CI=true and the VM cannot start: $vm_why"
    else
      note "cgroup VM runs skipped: the VM cannot start here: $vm_why"
      skipped=$((skipped + ${#cg_vm_runs[@]}))
    fi
  else
    if ! id sbxtest >/dev/null 2>&1 && [ "$(id -u)" -eq 0 ]; then
      useradd --system --no-create-home --home-dir /nonexistent --shell /bin/sh sbxtest 2>/dev/null ||
        useradd -M -s /bin/sh sbxtest || true
    fi
    for r in "${cg_vm_runs[@]}"; do
      IFS=: read -r u deleg mode <<<"$r"
      label="cgroup VM as $u${deleg:+ $deleg}${mode:+ $mode}"
      tag=cgroup-vm-$u${deleg:+-${deleg#--}}${mode:+-${mode#--}}
      args=(--timeout 900)
      if [ "$u" != root ]; then
        # The guest shares the host's root: the user must reach the checkout, binary and rootfs.
        if ! id "$u" >/dev/null 2>&1; then fail "$label: no user $u"; continue; fi
        if [ "$(id -u)" -ne 0 ]; then
          note "$label: skipped (tests/run is not root)"; skipped=$((skipped + 1)); continue
        fi
        if ! runuser -u "$u" -- test -r "$repo/tests/cgroup/test_cgroup.py" -a -x "$sandboxd" \
             -a -x "$rootfs/usr/bin/python3"; then
          fail "$label: $u cannot read the checkout, $sandboxd or $rootfs (the VM shares the host root as it is)"
          continue
        fi
        args+=(--user "$u")
      elif [ "$(id -u)" -ne 0 ]; then
        note "$label: skipped (tests/run is not root)"; skipped=$((skipped + 1)); continue
      fi
      [ -n "$deleg" ] && args+=("$deleg")
      t0=$SECONDS
      # A guest that gave no results (it never came up, or hung) is booted once more, saying so:
      # a VM under TCG is the test's machine, not what it tests. A second time is a failure.
      for cg_try in 1 2; do
        # stderr streams as it comes and is kept: through a tee of our own, waited for to its end
        # (bash sets no $! for a process substitution on a subshell's redirection).
        mkfifo "$rundir/$tag.fifo"
        tee "$rundir/$tag.err" <"$rundir/$tag.fifo" >&2 &
        tee_pid=$!
        (cd "$repo" && env -i "${vm_env[@]}" "$repo/tests/vm/run" "${args[@]}" -- tests/vm/cgroup-suite \
          ${mode:+"$mode"} "${pytest_args[@]}") >"$rundir/$tag.out" 2>"$rundir/$tag.fifo"
        rc=$?
        wait "$tee_pid"
        rm -f "$rundir/$tag.fifo"
        # pytest's own output, without the junit block (base64 between the markers).
        sed '/^@@CGROUP-SUITE-JUNIT-BEGIN@@$/,/^@@CGROUP-SUITE-JUNIT-END@@$/d' "$rundir/$tag.out"
        sed -n '/^@@CGROUP-SUITE-JUNIT-BEGIN@@$/,/^@@CGROUP-SUITE-JUNIT-END@@$/{/^@@/d;p}' "$rundir/$tag.out" |
          base64 -d >"$rundir/$tag.xml" 2>/dev/null
        [ ! -s "$rundir/$tag.xml" ] && [ "$cg_try" = 1 ] || break
        note "$label: no results (exit $rc; last output: $(tail -n 1 "$rundir/$tag.err" 2>/dev/null)): once more"
      done
      # A run without results (a hang until --timeout, a VM that died) also says where it was, in
      # the recap: the last lines it printed.
      if [ ! -s "$rundir/$tag.xml" ]; then
        # faulthandler's dump (tests/vm/cgroup-suite) lists the innermost frame first.
        cg_at=$(grep -m 1 -E 'File ".*/tests/(cgroup|integration)/' "$rundir/$tag.err" 2>/dev/null | sed 's/^ *//')
        cg_last=$(cat "$rundir/$tag.out" "$rundir/$tag.err" 2>/dev/null | grep -v '^ *$' | tail -n 2 | tr '\n' '|')
        label="$label [${cg_at:+hung at: $cg_at; }last output: ${cg_last:-none}]"
      fi
      cg_count "$label ($((SECONDS - t0)) s)" "$rundir/$tag.xml" "$rc"
    done
  fi
fi
