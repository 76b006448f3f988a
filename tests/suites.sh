# Sourced by tests/run after the integration suite: the other suites of `make check`, as root
# (or as the caller). Each adds to passed/failed/skipped through count_junit or count_line.
# Needs from tests/run: repo, build, py, rundir, sandboxd, rootfs, common_env, ci, note, fail,
# count_junit, want (tests/run --only), k_expr (tests/run -k).

# count_line LABEL PASSED FAILED SKIPPED
count_line() {
  passed=$((passed + $2)); failed=$((failed + $3)); skipped=$((skipped + $4))
  note "$1: $2 passed, $3 failed, $4 skipped"
  [ "$3" -eq 0 ] || printf '%s: %s failed\n' "$1" "$3" >>"$rundir/failures"
}

# run_pytest LABEL [env NAME=VALUE...] -- PATHS...
run_pytest() {
  local label=$1; shift
  local envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  mkdir -p "$rundir/$label/tmp"
  env -i "${common_env[@]}" HOME="$rundir/$label" TMPDIR="$rundir/$label/tmp" "${envs[@]}" \
    "$py" -m pytest -p no:cacheprovider --rootdir "$repo/tests" -q -rfEs \
      --junitxml="$rundir/$label.xml" ${k_expr:+-k "$k_expr"} "$@" >"$rundir/$label.log" 2>&1
  tail -n 15 "$rundir/$label.log" | grep -E '^(FAILED|ERROR)|passed|failed' >&2 || true
  count_junit "$rundir/$label.xml" "$label"
}

# run_node LABEL SUITE_DIR LOG [NAME=VALUE...]: a node --test suite (tests/mcp, tests/proxy) through
# its `run` script, counted from node's closing "ℹ pass/fail/skipped" lines.
run_node() {
  local label=$1 dir=$2 log=$3; shift 3
  if [ ! -x "$dir/run" ] || ! command -v node >/dev/null 2>&1; then
    [ "$ci" = true ] && fail "$label: node is missing"
    return
  fi
  env SANDBOXD="$sandboxd" SANDBOXD_ROOTFS="$rootfs" SANDBOXD_POLICY_DIR="${pdir_root:-$repo/policy}" \
    SANDBOXD_DATA_ROOTFS="${data_rootfs:-}" SANDBOXD_AUDIT_LOG=off "$@" "$dir/run" ${k_expr:+--test-name-pattern="$k_expr"} >"$log" 2>&1
  local np nf ns
  read -r np nf ns < <(awk '/^ℹ pass /{p=$3} /^ℹ fail /{f=$3} /^ℹ skipped /{s=$3} END{print p+0, f+0, s+0}' "$log")
  [ "$nf" -eq 0 ] || grep -E '✖|not ok|Error|ERROR: AddressSanitizer|runtime error' "$log" | head -n 30 >&2
  [ "$((np + nf))" -gt 0 ] || { tail -n 20 "$log" >&2; fail "$label: no test ran"; }
  count_line "$label" "$np" "$nf" "$ns"
}

# The policies the integration run picked (pdir_root), also when --only left that run out.
[ -n "${pdir_root:-}" ] || ! { want mcp || want proxy || want asan || want asan-mcp || want security-egress; } ||
  pdir_root=$(policy_dir_for "$rundir/policy" "$repo/policy")

if [ -n "${py:-}" ]; then
  # The Makefile: header dependencies, hardening flags in the objects, install and uninstall.
  ! want build || run_pytest build SANDBOXD="$sandboxd" -- "$repo/tests/build"
  # The escape suites again with the egress proxy on (every run `--allow-host 127.0.0.1:1`, so
  # `network proxy`): nothing they find open may open with it (#17). Root; ~20 s.
  ! want security-egress || run_pytest security-egress SANDBOXD_TEST_ALLOW_HOST=127.0.0.1:1 \
    SANDBOXD_POLICY_DIR="${pdir_root:-$repo/policy}" SANDBOXD_POLICY_SRC="${pdir_root:-$repo/policy}" \
    SANDBOXD_SHIPPED_POLICY_DIR="$repo/policy" SANDBOXD_TEST_WORK="$rundir/security-egress/work" -- "$repo/tests/security"
  # Documentation: man pages lint clean and cover every key, option and group.
  ! want docs || run_pytest docs -- "$repo/tests/test_docs.py"
  # The Debian package: make deb, then lintian and what the package holds (tests/deb); its
  # files at work are tests/integration/test_installed.py, in the runs above.
  if want deb || want docker; then
    deb=$build/sandboxd_$(sed -n 's/^#define SANDBOXD_VERSION "\(.*\)"/\1/p' "$repo/src/base/version.h")_$(dpkg --print-architecture).deb
    if make -s -C "$repo" deb BUILD="$build" >"$rundir/deb-build.log" 2>&1; then
      ! want deb || run_pytest deb SANDBOXD="$sandboxd" SANDBOXD_DEB="$deb" -- "$repo/tests/deb"
      # That package in a Docker container, under Docker's default seccomp profile and the
      # shipped one (root: it starts a private dockerd; about 10 s with the cached image).
      if ! want docker; then
        :
      elif [ "$(id -u)" -eq 0 ]; then
        run_pytest docker SANDBOXD="$sandboxd" SANDBOXD_DEB="$deb" SANDBOXD_BUILD="$build" -- "$repo/tests/docker"
      elif [ "$ci" = true ]; then
        fail "docker: the suite starts dockerd and needs root"
      fi
    else
      tail -n 20 "$rundir/deb-build.log" >&2
      fail "make deb failed"
    fi
  fi
  # The package on a clean machine: a fresh Debian tree booted in the VM installs the .deb,
  # imports the OCI image and runs sandboxd as root and as a new user (tests/vm/test_package.py).
  if want package; then
    pkg_deb=$build/sandboxd_$(sed -n 's/^#define SANDBOXD_VERSION "\(.*\)"/\1/p' "$repo/src/base/version.h")_$(dpkg --print-architecture).deb
    [ -f "$pkg_deb" ] || make -s -C "$repo" deb BUILD="$build" >"$rundir/deb-build.log" 2>&1 || fail "make deb failed"
    run_pytest package SANDBOXD="$sandboxd" SANDBOXD_DEB="$pkg_deb" SANDBOXD_SKIP_VM="${SANDBOXD_SKIP_VM:-0}" \
      -- "$repo/tests/vm/test_package.py"
  fi
  # OCI import: hostile layers, formats, and a local registry round trip (root: it runs a
  # registry and imports with ownership).
  if want image && [ "$(id -u)" -eq 0 ]; then
    run_pytest image -- "$repo/tests/image"
  fi
  # Deployment: `make image` (layout, and the unpacked tree serving MCP as a pod runs it: root)
  # and the Kubernetes manifests against the API schemas (tests/deploy). About 7 s.
  ! want deploy || run_pytest deploy -- "$repo/tests/deploy"
  # valgrind memcheck on the exec path and an MCP session.
  ! want valgrind || run_pytest valgrind -- "$repo/tests/valgrind"
  # The whole integration suite again under the ASan+UBSan build (`make asan`).
  asan=${SANDBOXD_ASAN_BUILD:-$repo/build-asan}
  if ! want asan; then
    :
  elif [ -x "$asan/sandboxd" ] && [ "$asan" != "$build" ]; then
    pdir=$(policy_dir_for "$rundir/asan-policy" "$repo/policy")
    run_pytest asan SANDBOXD="$asan/sandboxd" SANDBOXD_POLICY_DIR="$pdir" SANDBOXD_POLICY_SRC="$pdir" \
      SANDBOXD_SHIPPED_POLICY_DIR="$repo/policy" SANDBOXD_TEST_WORK="$rundir/asan-work" \
      ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
      -- "$repo/tests/integration"
  elif [ "$ci" = true ]; then
    fail "no ASan build at $asan (make asan)"
  fi
  # The unit tests and the MCP suite under the ASan+UBSan build (asan-mcp: no pytest needed).
  if ! want asan-mcp; then
    :
  elif [ -x "$asan/sandboxd" ] && [ "$asan" != "$build" ]; then
    asan_p=0 asan_f=0
    for t in "$asan"/tests/*; do
      [ -x "$t" ] || continue
      line=$(cd "$repo" && ASAN_OPTIONS=detect_leaks=1 "$t" 2>&1 | grep -E '[0-9]+ passed, [0-9]+ failed' | tail -n 1)
      read -r p f < <(printf '%s\n' "$line" | grep -oE '[0-9]+ passed, [0-9]+ failed' | awk '{print $1, $3}')
      [ -n "${p:-}" ] || { fail "ASan unit test $(basename "$t") printed no summary (crashed?)"; continue; }
      asan_p=$((asan_p + p)); asan_f=$((asan_f + f))
    done
    count_line "unit (ASan)" "$asan_p" "$asan_f" 0
    # And the MCP suite against the ASan binary.
    run_node "mcp (ASan)" "$repo/tests/mcp" "$rundir/mcp-asan.log" SANDBOXD="$asan/sandboxd" CLAUDE_CODE_TEST=0 \
      ASAN_OPTIONS=detect_leaks=1
  elif [ "$ci" = true ]; then
    fail "no ASan build at $asan (make asan)"
  fi
fi

# Fuzz targets: replay every saved regression and corpus input, then a short fuzzing pass.
if ! want fuzz; then
  :
elif compgen -G "$repo/build-fuzz/fuzz_*" >/dev/null; then
  fz_p=0 fz_f=0
  for f in "$repo"/build-fuzz/fuzz_*; do
    n=${f##*/fuzz_}
    dirs=()
    for d in "$repo/tests/fuzz/regressions/$n" "$repo/tests/fuzz/corpus/$n"; do
      [ -d "$d" ] && dirs+=("$d")
    done
    mkdir -p "$rundir/fuzz-$n"
    if "$f" -runs=0 "${dirs[@]}" >"$rundir/fuzz-$n.replay" 2>&1 &&
       "$f" -max_total_time="${FUZZ_SECONDS:-10}" -artifact_prefix="$rundir/fuzz-$n/" "$rundir/fuzz-$n" "${dirs[@]}" \
         >"$rundir/fuzz-$n.log" 2>&1; then
      fz_p=$((fz_p + 1))
    else
      fz_f=$((fz_f + 1))
      tail -n 30 "$rundir/fuzz-$n.replay" "$rundir/fuzz-$n.log" >&2
      mkdir -p "$repo/tests/fuzz/regressions/$n"
      cp "$rundir/fuzz-$n"/crash-* "$rundir/fuzz-$n"/leak-* "$repo/tests/fuzz/regressions/$n/" 2>/dev/null || true
      note "fuzz $n: crash saved under tests/fuzz/regressions/$n/ (keep it as a regression input)"
    fi
  done
  # fuzz_bridge's live mode, briefly: code in a sandbox sends each input to a real `sandboxd mcp`,
  # which must stay up and answer ping (the ASan build if there).
  if [ -x "$repo/build-fuzz/fuzz_bridge" ]; then
    mkdir -p "$rundir/fuzz-bridge-live"
    live_sbx=${SANDBOXD_ASAN_BUILD:-$repo/build-asan}/sandboxd
    [ -x "$live_sbx" ] || live_sbx=$sandboxd
    # A TMPDIR of its own: what its sandboxd leaves there for a moment is not in /tmp, which other
    # suites running beside this one check (tests/run's second lane).
    mkdir -p "$rundir/fuzz-tmp"
    if (cd "$repo" && TMPDIR="$rundir/fuzz-tmp" SANDBOXD_FUZZ_BRIDGE=live SANDBOXD_ROOTFS="$rootfs" SANDBOXD="$live_sbx" \
          build-fuzz/fuzz_bridge -max_total_time="${FUZZ_LIVE_SECONDS:-3}" -max_len=16384 -timeout=120 \
          -artifact_prefix="$rundir/fuzz-bridge-live/" "$rundir/fuzz-bridge-live" tests/fuzz/corpus/bridge-live) \
        >"$rundir/fuzz-bridge-live.log" 2>&1; then
      fz_p=$((fz_p + 1))
    else
      fz_f=$((fz_f + 1))
      tail -n 30 "$rundir/fuzz-bridge-live.log" >&2
      mkdir -p "$repo/tests/fuzz/regressions/bridge-live"
      cp "$rundir/fuzz-bridge-live"/crash-* "$repo/tests/fuzz/regressions/bridge-live/" 2>/dev/null || true
      note "fuzz bridge-live: the input that stopped sandboxd is under tests/fuzz/regressions/bridge-live/"
    fi
  fi
  count_line fuzz "$fz_p" "$fz_f" 0
elif [ "$ci" = true ]; then
  fail "no fuzz targets built (make fuzz-build)"
fi

# MCP: the official TypeScript SDK client and Claude Code's CLI against `sandboxd mcp`.
! want mcp || run_node mcp "$repo/tests/mcp" "$rundir/mcp.log"
# The protocol's acceptance files and the tasks' again over Streamable HTTP (sandboxd mcp
# --http), with sessions and --stateless (about 20 s each).
if want mcp; then
  for t in http http-stateless; do
    run_node "mcp ($t)" "$repo/tests/mcp" "$rundir/mcp-$t.log" SANDBOXD_MCP_TRANSPORT=$t \
      MCP_TESTS="./mcp.test.mjs ./execute.test.mjs ./tasks.test.mjs"
  done
fi
# The same suite with every Python call from the prestart pool (--warm-mode prestart; auto, the
# default, forks each from a template, as root too): about 45 s more.
! want mcp || run_node "mcp (prestart)" "$repo/tests/mcp" "$rundir/mcp-prestart.log" \
  SANDBOXD_MCP_ARGS="--warm-mode prestart" CLAUDE_CODE_TEST=0
# The official MCP conformance suite (tests/conformance: HTTP with sessions, --stateless, stdio;
# revisions 2025-11-25 and 2026-07-28; a scenario each; about 15 s). Its list of every scenario's
# outcome goes to the run directory (tests/conformance/run alone refreshes the tree's results.txt).
! want conformance || run_node conformance "$repo/tests/conformance" "$rundir/conformance.log" \
  SANDBOXD_NODE_ROOTFS="$node_rootfs" RESULTS="$rundir/conformance-results.txt"
# The MCP proxy with real host servers (server-everything, server-memory).
! want proxy || run_node proxy "$repo/tests/proxy" "$rundir/proxy.log"
# Three stateless HTTP replicas behind nginx, one killed mid-run (tests/scale; about 5 s).
! want scale || run_node scale "$repo/tests/scale" "$rundir/scale.log"
