# sandboxd — plain Makefile. `make`, `make check`, `make rootfs`, `make install PREFIX=...`.
CC      ?= cc
PREFIX  ?= /usr/local
BUILD   ?= build
PKGS     = libseccomp libcap-ng yajl libmnl libmd
WARN     = -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wformat=2 \
           -Wno-format-nonliteral -Wno-format-truncation
HARDEN   = -fstack-protector-strong -D_FORTIFY_SOURCE=3 -fPIE
OPT     ?= -O2 -g
CFLAGS  ?=
override CFLAGS += -std=gnu17 -D_GNU_SOURCE $(WARN) $(HARDEN) $(OPT) $(shell pkg-config --cflags $(PKGS))
LDFLAGS ?=
override LDFLAGS += -pie -Wl,-z,relro,-z,now
LDLIBS   = $(shell pkg-config --libs $(PKGS))

SRCS    := $(wildcard src/*.c)
OBJS    := $(SRCS:src/%.c=$(BUILD)/obj/%.o)
LIBOBJS := $(filter-out $(BUILD)/obj/main.o,$(OBJS))
UNIT_SRCS := $(wildcard tests/unit/*.c)
UNIT_BINS := $(UNIT_SRCS:tests/unit/%.c=$(BUILD)/tests/%)

ROOTFS  ?= rootfs/python-3.14-slim

.PHONY: all clean check check-unit check-integration asan rootfs install bench format demo
all: $(BUILD)/sandboxd

$(BUILD)/sandboxd: $(OBJS)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/obj/%.o: src/%.c $(wildcard src/*.h) | $(BUILD)/obj
	@echo "  CC $<"; $(CC) $(CFLAGS) -c -o $@ $<

$(BUILD)/tests/%: tests/unit/%.c $(LIBOBJS) | $(BUILD)/tests
	$(CC) $(CFLAGS) -Isrc $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/obj $(BUILD)/tests:
	mkdir -p $@

# The sanitizer build: same sources, ASan + UBSan, no fortify (it conflicts with ASan).
asan:
	$(MAKE) BUILD=build-asan OPT="-O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined -U_FORTIFY_SOURCE" \
	  LDFLAGS="-fsanitize=address,undefined" all $(UNIT_BINS:$(BUILD)/%=build-asan/%)

rootfs:
	scripts/build-rootfs $(ROOTFS)

check-unit: $(UNIT_BINS)
	@set -e; for t in $(UNIT_BINS); do $$t; done

# Everything: unit tests, then the integration suite as root and as an unprivileged user.
check: all $(UNIT_BINS) rootfs
	tests/run --build $(BUILD)

install: all
	install -D -m 0755 $(BUILD)/sandboxd $(DESTDIR)$(PREFIX)/bin/sandboxd
	install -d $(DESTDIR)$(PREFIX)/share/sandboxd/policy
	install -m 0644 policy/*.policy policy/*.inc $(DESTDIR)$(PREFIX)/share/sandboxd/policy/
	if [ -d src/sandbox ]; then install -d $(DESTDIR)$(PREFIX)/share/sandboxd/python && \
	  cp -R src/sandbox/. $(DESTDIR)$(PREFIX)/share/sandboxd/python/; fi
	for m in man/*.[1-9]; do [ -e "$$m" ] || continue; s=$${m##*.}; \
	  install -D -m 0644 $$m $(DESTDIR)$(PREFIX)/share/man/man$$s/$${m##*/}; done

bench: all rootfs
	bench/run

# The README's first command: run the demo script in a sandbox and show its exit status.
demo: all rootfs
	@echo '$$ build/sandboxd exec --report build/demo-report.json scripts/demo.py'
	@build/sandboxd exec --report build/demo-report.json scripts/demo.py; echo "exit status: $$?"
	@echo '$$ cat build/demo-report.json'; cat build/demo-report.json

format:
	clang-format -i src/*.c src/*.h tests/unit/*.c

clean:
	rm -rf build build-asan
