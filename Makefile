# sandboxd — plain Makefile. `make`, `make check`, `make rootfs`, `make install PREFIX=...`.
CC      ?= cc
PREFIX  ?= /usr/local
BUILD   ?= build
PKGS     = libseccomp libcap-ng yajl libmnl libmd
# libarchive: headers only; image/image_layer.c loads it with dlopen when an image is imported. The same for
# libmicrohttpd, which mcp/mcp_http_daemon.c loads when `sandboxd mcp --http` starts.
CFLAGS_PKGS = $(shell pkg-config --cflags libarchive libmicrohttpd)
WARN     = -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wformat=2 \
           -Wno-format-nonliteral
# -fstack-clash-protection probes each page of a large stack frame, so no allocation jumps the
# guard page; -fcf-protection marks indirect-branch targets and returns for CET (x86 only: arm64's
# equivalent is -mbranch-protection).
HARDEN_CF := $(if $(filter aarch64-%,$(shell $(CC) -dumpmachine)),-mbranch-protection=standard,-fcf-protection)
HARDEN   = -fstack-protector-strong -fstack-clash-protection $(HARDEN_CF) -D_FORTIFY_SOURCE=3 -fPIE
OPT     ?= -O2 -g
CFLAGS  ?=
# -iquote src: every include names its layer ("base/util.h"; src/README.md, make lint).
override CFLAGS += -std=gnu17 -D_GNU_SOURCE -iquote src $(WARN) $(HARDEN) $(OPT) $(shell pkg-config --cflags $(PKGS)) $(CFLAGS_PKGS)
LDFLAGS ?=
override LDFLAGS += -pie -Wl,-z,relro,-z,now
# libhttp-parser (the egress proxy's request heads, egress/egress_http.c) is dlopened: its header only.
# The libraries are linked shared by default, the package's too: sandboxd's confinement rests on
# libseccomp (and libcap-ng), and a fix Debian ships for one must reach an installed sandboxd
# without a rebuild. STATIC_LIBS=1 links those whose -dev package has a static archive from it
# (libseccomp, libcap-ng, yajl's libyajl_s, libmd; libmnl ships none), for who chooses it: every
# sandbox starts a fresh sandboxd process, and without the four the dynamic loader maps,
# relocates and binds them in each one (sandboxd --version 1.09 -> 0.96 ms, exec of pass 1.5-2.5%
# faster), but then their security fixes come only with a rebuild of sandboxd. `make deb` refuses
# such a build (scripts/deb/build-deb).
STATIC_LIBS ?= 0
lib_static = $(if $(and $(filter 1,$(STATIC_LIBS)),$(filter /%,$(shell $(CC) -print-file-name=$(2)))),-l:$(2),-l$(1))
LDLIBS  := $(call lib_static,seccomp,libseccomp.a) $(call lib_static,cap-ng,libcap-ng.a) \
           $(call lib_static,yajl,libyajl_s.a) -lmnl $(call lib_static,md,libmd.a)

# The sources, one directory per layer (src/README.md); src/inside/ is built apart, below.
SRCS    := $(filter-out src/inside/%,$(wildcard src/*/*.c))
OBJS    := $(SRCS:src/%.c=$(BUILD)/obj/%.o)
LIBOBJS := $(filter-out $(BUILD)/obj/cli/main.o,$(OBJS))
UNIT_SRCS := $(wildcard tests/unit/*.c)
UNIT_BINS := $(UNIT_SRCS:tests/unit/%.c=$(BUILD)/tests/%)

ROOTFS  ?= rootfs/python-3.14-slim
# The data rootfs: the slim tree plus numpy, pandas and matplotlib (scripts/build-rootfs --profile data).
ROOTFS_DATA ?= rootfs/python-3.14-data
# The JavaScript rootfs: Node.js from Debian sid, no Python (scripts/build-rootfs --profile node).
ROOTFS_NODE ?= rootfs/node-slim

.PHONY: all clean check check-run check-quick check-unit lint asan rootfs rootfs-data rootfs-node install uninstall deb image bench bench-parts format format-check demo fuzz fuzz-build soak
all: $(BUILD)/sandboxd

# The libraries as linked (STATIC_LIBS), rewritten only when they change, as the Makefile is read:
# a build with another STATIC_LIBS relinks, and an up-to-date tree stays so (make -q all).
$(shell mkdir -p $(BUILD) && { echo '$(LDLIBS)' | cmp -s - $(BUILD)/ldlibs || echo '$(LDLIBS)' >$(BUILD)/ldlibs; })

$(BUILD)/sandboxd: $(OBJS) $(BUILD)/ldlibs
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $(OBJS) $(LDLIBS)

# -MMD -MP: each compile writes the headers it read into a .d file beside its output (included
# below), so a header change rebuilds exactly what includes it, and a deleted header is no error.
# Each .d names its target both as given and absolute: BUILD=build and BUILD=$PWD/build share it.
# The flags live in this file: a change here rebuilds everything.
$(BUILD)/obj/%.o: src/%.c Makefile | $(BUILD)/obj
	@mkdir -p $(@D); echo "  CC $<"; $(CC) $(CFLAGS) -MMD -MP -MT $@ -MT $(abspath $@) -c -o $@ $<

$(BUILD)/tests/%: tests/unit/%.c $(LIBOBJS) Makefile | $(BUILD)/tests
	$(CC) $(CFLAGS) -MMD -MP -MF $@.d -MT $@ -MT $(abspath $@) $(LDFLAGS) -o $@ $< $(LIBOBJS) $(LDLIBS)

-include $(OBJS:.o=.d) $(UNIT_BINS:=.d)

# The runner's text is assembled into this object (.incbin), so it rebuilds when runner.py changes.
$(BUILD)/obj/mcp/mcp_runner.o: src/inside/runner.py src/inside/template.py src/inside/session.py \
	src/inside/session.js

# The fork template's C pid 1 and the init it execs (src/inside/zygote.c, callinit.c): freestanding
# (no libc, so any rootfs can load them), x86_64 only, not built with the flags above (no
# sanitizer, no fortify, no stack protector: there is no libc to back them). sandbox/fork_zygote.o
# assembles them in (.incbin); on other architectures it holds none and calls keep the Python pid 1.
ZYGOTE_CFLAGS = -std=gnu17 -O2 -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
                -ffreestanding -fno-builtin -fno-stack-protector -fcf-protection=none -nostdlib
ZYGOTE_BLOBS := $(if $(filter x86_64-%,$(shell $(CC) -dumpmachine)),$(BUILD)/zygote.so $(BUILD)/callinit)
# The code's first exe (src/inside/execshim.c, sandbox/exec_shim.c): the same freestanding build.
EXEC_SHIM_BLOB := $(if $(filter x86_64-%,$(shell $(CC) -dumpmachine)),$(BUILD)/execshim)
# The C pid 1 links the setup steps every sandbox takes (src/sandbox/contain.c): the same file as
# sandboxd's cold path, built freestanding here.
ZYGOTE_SRCS = src/inside/zygote.c src/sandbox/contain.c
$(BUILD)/zygote.so: $(ZYGOTE_SRCS) src/sandbox/contain.h src/sandbox/contain_sys.h src/inside/rawsys.h Makefile | $(BUILD)/obj
	$(CC) $(ZYGOTE_CFLAGS) -DSBX_FREESTANDING -iquote src -fPIC -shared -fvisibility=hidden -s -Wl,-z,relro,-z,now \
	  -o $@ $(ZYGOTE_SRCS)
$(BUILD)/callinit: src/inside/callinit.c src/inside/rawsys.h src/sandbox/contain_sys.h Makefile | $(BUILD)/obj
	$(CC) $(ZYGOTE_CFLAGS) -DSBX_FREESTANDING -iquote src -static -fno-pie -no-pie -s -o $@ $<
$(BUILD)/execshim: src/inside/execshim.c src/inside/rawsys.h src/sandbox/contain_sys.h Makefile | $(BUILD)/obj
	$(CC) $(ZYGOTE_CFLAGS) -DSBX_FREESTANDING -iquote src -static -fno-pie -no-pie -s -o $@ $<
$(BUILD)/obj/sandbox/exec_shim.o: $(EXEC_SHIM_BLOB)
$(BUILD)/obj/sandbox/exec_shim.o: override CFLAGS += -DEXEC_SHIM_BUILD=\"$(BUILD)\"
$(BUILD)/obj/sandbox/fork_zygote.o: $(ZYGOTE_BLOBS)
$(BUILD)/obj/sandbox/fork_zygote.o: override CFLAGS += -DZYGOTE_BUILD=\"$(BUILD)\"

$(BUILD)/obj $(BUILD)/tests:
	mkdir -p $@

# The sanitizer build: same sources, ASan + UBSan, no fortify (it conflicts with ASan).
asan:
	$(MAKE) BUILD=build-asan OPT="-O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined -U_FORTIFY_SOURCE" \
	  LDFLAGS="-fsanitize=address,undefined" all $(UNIT_BINS:$(BUILD)/%=build-asan/%)

# libFuzzer targets (tests/fuzz/fuzz_*.c) under ASan+UBSan. `make fuzz FUZZ_SECONDS=60` runs each
# for that long on its corpus; a crash is saved under tests/fuzz/regressions/NAME/, which
# `make check` replays.
FUZZ_SECONDS ?= 30
# Then fuzz_bridge's live mode: each input goes from code in a sandbox to a real `sandboxd mcp`
# (build-asan/sandboxd if built, else build/sandboxd; the rootfs), which must stay up and answer
# ping; FUZZ_LIVE_SECONDS of it.
FUZZ_LIVE_SECONDS ?= 10
FUZZ_SRCS := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BINS := $(FUZZ_SRCS:tests/fuzz/%.c=build-fuzz/%)
FUZZ_CFLAGS = -std=gnu17 -D_GNU_SOURCE -g -O1 -fno-omit-frame-pointer -fsanitize=fuzzer-no-link,address,undefined \
              -fno-sanitize-recover=undefined $(shell pkg-config --cflags $(PKGS)) -iquote src
FUZZ_LIBSRCS := $(filter-out src/cli/main.c,$(SRCS))
# The sources are compiled once for every target (each used to compile all of them again: 8
# targets, 80 files each), with their header dependencies (-MMD) as for the main build.
FUZZ_OBJS := $(FUZZ_LIBSRCS:src/%.c=build-fuzz/obj/%.o)

build-fuzz/obj/%.o: src/%.c Makefile
	@mkdir -p $(@D)
	@echo "  CC (fuzz) $<"; clang $(FUZZ_CFLAGS) -MMD -MP -c -o $@ $<
build-fuzz/obj/mcp/mcp_runner.o: src/inside/runner.py src/inside/template.py src/inside/session.py \
	src/inside/session.js
-include $(FUZZ_OBJS:.o=.d)
# Not intermediate files of the pattern chain: kept, so a rebuild compiles only what changed.
.SECONDARY: $(FUZZ_OBJS)

build-fuzz/%: tests/fuzz/%.c $(FUZZ_OBJS)
	@mkdir -p build-fuzz
	clang $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $< $(FUZZ_OBJS) $(LDLIBS)

fuzz-build: $(FUZZ_BINS)

fuzz: $(FUZZ_BINS)
	@set -e; for f in $(FUZZ_BINS); do n=$${f#build-fuzz/fuzz_}; \
	  mkdir -p tests/fuzz/corpus/$$n tests/fuzz/regressions/$$n build-fuzz/corpus-$$n; \
	  echo "fuzz: $$n for $(FUZZ_SECONDS)s"; \
	  $$f -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 -artifact_prefix=tests/fuzz/regressions/$$n/ \
	    build-fuzz/corpus-$$n tests/fuzz/corpus/$$n 2>&1 | grep -E '^(stat::number_of_executed_units|==.*ERROR|SUMMARY)' || true; \
	  if ls tests/fuzz/regressions/$$n/crash-* tests/fuzz/regressions/$$n/leak-* >/dev/null 2>&1; then \
	    echo "fuzz: $$n found a crash (saved in tests/fuzz/regressions/$$n/)"; exit 1; fi; done
	@mkdir -p tests/fuzz/regressions/bridge-live build-fuzz/corpus-bridge-live; \
	  echo "fuzz: bridge-live (code in a sandbox floods a real sandboxd mcp) for $(FUZZ_LIVE_SECONDS)s"; \
	  if ! SANDBOXD_FUZZ_BRIDGE=live build-fuzz/fuzz_bridge -max_total_time=$(FUZZ_LIVE_SECONDS) -max_len=16384 \
	      -timeout=120 -print_final_stats=1 -artifact_prefix=tests/fuzz/regressions/bridge-live/ \
	      build-fuzz/corpus-bridge-live tests/fuzz/corpus/bridge-live >build-fuzz/bridge-live.log 2>&1; then \
	    tail -n 20 build-fuzz/bridge-live.log; \
	    echo "fuzz: bridge-live failed (an input that stopped sandboxd is in tests/fuzz/regressions/bridge-live/)"; exit 1; fi; \
	  grep -E '^stat::number_of_executed_units' build-fuzz/bridge-live.log

# The real python:3.14-slim from a registry if one answers (scripts/fetch-rootfs gives up within
# FETCH_TIMEOUT seconds), else the offline Debian sid build; both go through `sandboxd rootfs import`.
# Nothing is fetched or built while the tree is up to date with either.
FETCH_TIMEOUT ?= 3
rootfs: $(BUILD)/sandboxd
	@if scripts/fetch-rootfs --check $(ROOTFS) || scripts/build-rootfs --check $(ROOTFS); then :; \
	elif SANDBOXD=$(BUILD)/sandboxd scripts/fetch-rootfs --timeout $(FETCH_TIMEOUT) $(ROOTFS); then \
	  echo "rootfs: used scripts/fetch-rootfs (registry image)"; \
	else echo "rootfs: fetch failed; falling back to scripts/build-rootfs (offline build)"; \
	  SANDBOXD=$(BUILD)/sandboxd scripts/build-rootfs $(ROOTFS) && echo "rootfs: used scripts/build-rootfs"; fi

# Offline only (no registry ships this one); rebuilt when scripts/build-rootfs changes, like the slim tree.
rootfs-data: $(BUILD)/sandboxd
	@SANDBOXD=$(BUILD)/sandboxd scripts/build-rootfs --profile data $(ROOTFS_DATA)

# Offline only too; it shares rootfs/.apt-cache (libc and the base system come from there).
rootfs-node: $(BUILD)/sandboxd
	@SANDBOXD=$(BUILD)/sandboxd scripts/build-rootfs --profile node $(ROOTFS_NODE)

# The inner loop (a few minutes): unit tests and the integration suite as the caller, without the
# modules marked slow (tests/conftest.py). make check runs everything, as root and unprivileged.
check-quick: all $(UNIT_BINS) lint rootfs
	tests/run --build $(BUILD) --quick

check-unit: $(UNIT_BINS) lint
	@set -e; for t in $(UNIT_BINS); do $$t; done

# A string built into a fixed buffer goes through util.c's checked helpers, never a bare snprintf
# (-Wformat-truncation sees only the unchecked calls it can prove likely to cut). The layers: each
# include names its layer and points down (scripts/lint-layers reads them from src/README.md).
lint:
	@if grep -n '\bsnprintf(' $(filter-out src/base/util.c,$(SRCS)); then \
	  echo "lint: use bufprintf, bufcatf or bufprintf_cut (src/base/util.h), not snprintf" >&2; exit 1; fi
	@scripts/lint-layers src

# Everything (tests/run): unit tests, the integration suite as root and as an unprivileged user,
# then docs, OCI images, valgrind, the integration suite under ASan+UBSan, fuzz replay and a
# short fuzzing pass, and the MCP suite (tests/suites.sh).
# The packages only the tests use come first (scripts/install-deps --test; quiet when installed):
# `make demo` never installs them.
check:
	scripts/install-deps --test
	$(MAKE) check-run
check-run: all $(UNIT_BINS) lint format-check rootfs rootfs-data rootfs-node asan fuzz-build deb
	tests/run --build $(BUILD)

# The rootfs store: where `sandboxd rootfs import|list` and exec's default rootfs look when the
# binary is installed (src/base/paths.c, the one place that knows the layout). Fixed in the code, so not
# a knob here.
ROOTFS_STORE = /var/lib/sandboxd/rootfs
MANS := $(wildcard man/*.[1-9])

install: all
	install -D -m 0755 $(BUILD)/sandboxd $(DESTDIR)$(PREFIX)/bin/sandboxd
	install -d $(DESTDIR)$(PREFIX)/share/sandboxd/policy
	install -m 0644 policy/*.policy policy/*.inc $(DESTDIR)$(PREFIX)/share/sandboxd/policy/
	if [ -d src/inside ]; then install -d $(DESTDIR)$(PREFIX)/share/sandboxd/python && \
	  cp -R src/inside/. $(DESTDIR)$(PREFIX)/share/sandboxd/python/; fi
	for m in man/*.[1-9]; do [ -e "$$m" ] || continue; s=$${m##*.}; \
	  install -D -m 0644 $$m $(DESTDIR)$(PREFIX)/share/man/man$$s/$${m##*/}; done
	install -d -m 0755 $(DESTDIR)$(ROOTFS_STORE)
	install -D -m 0755 scripts/build-rootfs $(DESTDIR)$(PREFIX)/libexec/sandboxd/build-rootfs
	install -m 0755 scripts/oci-pack $(DESTDIR)$(PREFIX)/libexec/sandboxd/oci-pack
	sed 's|/usr/local/bin/sandboxd|$(PREFIX)/bin/sandboxd|g' policy/apparmor.d/sandboxd >$(BUILD)/apparmor.sandboxd
	install -D -m 0644 $(BUILD)/apparmor.sandboxd $(DESTDIR)/etc/apparmor.d/sandboxd
	install -D -m 0644 scripts/docker/seccomp.json $(DESTDIR)$(PREFIX)/share/sandboxd/docker/seccomp.json

# What install put there. The rootfs store goes only if empty: imported trees are the user's data
# (remove them with rm -rf $(ROOTFS_STORE)/NAME*).
uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/sandboxd
	rm -f $(patsubst policy/%,$(DESTDIR)$(PREFIX)/share/sandboxd/policy/%,$(wildcard policy/*.policy policy/*.inc))
	rm -rf $(DESTDIR)$(PREFIX)/share/sandboxd/python $(DESTDIR)$(PREFIX)/share/sandboxd/docker $(DESTDIR)$(PREFIX)/libexec/sandboxd
	rm -f $(DESTDIR)/etc/apparmor.d/sandboxd
	-rmdir --ignore-fail-on-non-empty $(DESTDIR)$(PREFIX)/libexec $(if $(DESTDIR),$(DESTDIR)/etc/apparmor.d $(DESTDIR)/etc)
	-rmdir --ignore-fail-on-non-empty $(DESTDIR)$(PREFIX)/share/sandboxd/policy $(DESTDIR)$(PREFIX)/share/sandboxd
	rm -f $(foreach m,$(MANS),$(DESTDIR)$(PREFIX)/share/man/man$(subst .,,$(suffix $(m)))/$(notdir $(m)))
	-rmdir --ignore-fail-on-non-empty $(DESTDIR)$(ROOTFS_STORE) $(DESTDIR)$(dir $(ROOTFS_STORE))

# The Debian package build/sandboxd_VERSION_ARCH.deb: a staged `make install PREFIX=/usr`, Depends
# from dpkg-shlibdeps plus the dlopen'ed libarchive; every library shared (scripts/deb/build-deb
# refuses a STATIC_LIBS=1 build). make check lints it.
DEB_VERSION = $(shell sed -n 's/^\#define SANDBOXD_VERSION "\(.*\)"/\1/p' src/base/version.h)
DEB_ARCH = $(shell dpkg --print-architecture 2>/dev/null)
deb: all
	scripts/deb/build-deb $(BUILD) $(BUILD)/sandboxd_$(DEB_VERSION)_$(DEB_ARCH).deb

# The container image (scripts/make-image): sandboxd installed under /usr, its libraries and the
# slim rootfs in the store, as an OCI layout; no docker. Serves MCP over HTTP (scripts/deploy/).
IMAGE ?= $(BUILD)/sandboxd.oci
image: all
	rm -rf $(IMAGE)
	scripts/make-image --build $(BUILD) --rootfs $(ROOTFS) $(IMAGE)

# make bench writes bench/results/; bench/readme-figures then puts them into bench/README.md (the
# tables), README.md (one figure) and bench/*.svg.
# BENCH_USER: an unprivileged user to also run bwrap and sandboxd as (default: sbxtest, if it exists).
BENCH_USER ?= $(shell id -u sbxtest >/dev/null 2>&1 && echo sbxtest)
bench: all rootfs rootfs-data
	bench/run $(if $(BENCH_USER),--user $(BENCH_USER))
	bench/idle
	bench/mcp 350
	bench/data

# bench/parts: what the cgroup and seccomp each cost exec, side by side with bubblewrap, from a
# build of its own (build-parts/, with SBX_BENCH_PARTS: SBX_BENCH_WITHOUT takes them away; never
# installed, and no other build has the switch).
bench-parts: rootfs
	$(MAKE) BUILD=build-parts CFLAGS=-DSBX_BENCH_PARTS build-parts/sandboxd
	bench/parts build-parts/sandboxd

# 10,000 run_python calls (ok, failing, timing out, cancelled); sandboxd's fds, RSS, cgroups and
# the host's mounts must stay flat. SOAK_CALLS=N for another count.
SOAK_CALLS ?= 10000
soak: all rootfs
	cd tests/mcp && (test -d node_modules/@modelcontextprotocol/sdk || npm ci --no-audit --no-fund --loglevel=error) && \
	  SANDBOXD_AUDIT_LOG=off node soak.mjs $(SOAK_CALLS)

# The README's first command: run the demo script in a sandbox and show its exit status.
demo: all rootfs
	@echo '$$ build/sandboxd exec --report build/demo-report.json scripts/demo.py'
	@build/sandboxd exec --report build/demo-report.json scripts/demo.py; echo "exit status: $$?"
	@echo '$$ cat build/demo-report.json'; cat build/demo-report.json

format:
	clang-format -i src/*/*.c src/*/*.h tests/unit/*.c bench/*.c

# Fails, naming each file and line, where the tree differs from .clang-format (`make format` fixes).
format-check:
	clang-format --dry-run -Werror src/*/*.c src/*/*.h tests/unit/*.c bench/*.c

clean:
	rm -rf build build-asan build-fuzz build-parts
