# SPDX-License-Identifier: Apache-2.0
# fleetfs build. Everything under fleetfs/, broker/ and herdr/ is one library
# (build/libfleetfs.a); the daemon and every unit test link against it.
#   make            build the daemon (build/fleetfs)
#   make test       unit + integration + fault tests, then again under ASan/UBSan
#   make soak       the fault and cluster tests, longer (FAULT_SCALE=10), then
#                   issue 16's broker-fault integration tests (SOAK_INTEGRATION),
#                   then test_mailbox under valgrind (make test leaves it out)
#   make run        install deps, start a local broker, mount ./fleet
#                   (FLEET_CLUSTER=3 make run: a local three-node cluster instead)
#   make demo-fleet three hosts as network namespaces exchanging messages
#   make san        the ASan/UBSan build only (build/san/), on the portable
#                   fallbacks (PLATFORM=portable)
#   make install    install the daemon, the operator's fleetfs-broker (host
#                   logins: scripts/broker), the man pages, systemd units and docs
#                   (PREFIX=/usr/local, DESTDIR=; make uninstall removes them)
#   make deb        the Debian package $(B)/fleetfs_<version>_<arch>.deb
#                   (dpkg-buildpackage, debhelper; packaging in scripts/debian/)
#   make clean

PKGS    := fuse3 librabbitmq jansson libsodium glib-2.0
B       ?= build
SAN     ?=
CC      ?= gcc
WARN    := -Wall -Wextra -Werror -Wshadow -Wformat=2 -Wno-format-nonliteral -Wno-format-truncation
CFLAGS  ?= -O2 -g
ifeq ($(SAN),1)
CFLAGS  := -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
LDSAN   := -fsanitize=address,undefined
endif
# Bounds the compiler can see are checked at run time (_FORTIFY_SOURCE) in
# every optimised build but the sanitised one (ASan checks them itself);
# left alone when the caller's flags already say (the package build's do).
ifneq ($(SAN),1)
ifeq ($(findstring _FORTIFY_SOURCE,$(CFLAGS)),)
ifneq ($(filter -O1 -O2 -O3 -Os,$(CFLAGS)),)
FORTIFY := -D_FORTIFY_SOURCE=2
endif
endif
endif
# pkg-config is asked quietly: on a fresh machine neither it nor the
# libraries are there yet, and `make run` installs them before it builds
# (scripts/run). A build without them stops once, at deps-check, saying
# which are missing and what to run.
PKG_CONFIG ?= pkg-config
# macOS (uname -s: Darwin; doc/macos.md): fuse3 is macFUSE's, whose fuse3.pc
# is in /usr/local/lib/pkgconfig, a directory Homebrew's pkg-config does not
# search on Apple silicon, so PKGENV adds it (make's export does not reach
# $(shell) before make 4.4). Apple's headers show their whole API under
# _DARWIN_C_SOURCE (_GNU_SOURCE, glibc's, stays: make cross-macos compiles
# with it). Apple's clang does not know every GCC warning this file turns
# off (-Wno-format-truncation).
# Everything here stays within GNU make 3.81, the make macOS ships.
UNAME_S := $(shell uname -s 2>/dev/null)
ifeq ($(UNAME_S),Darwin)
MACFUSE_PKGCONFIG ?= /usr/local/lib/pkgconfig
PKGENV  := PKG_CONFIG_PATH="$(MACFUSE_PKGCONFIG)$${PKG_CONFIG_PATH:+:$$PKG_CONFIG_PATH}"
OS_CPPFLAGS := -D_GNU_SOURCE -D_DARWIN_C_SOURCE
WARN    += -Wno-unknown-warning-option
else
PKGENV  :=
OS_CPPFLAGS := -D_GNU_SOURCE
endif
PKG_OK  := $(shell $(PKGENV) $(PKG_CONFIG) --exists $(PKGS) 2>/dev/null && echo yes)
CPPFLAGS := -std=gnu11 $(OS_CPPFLAGS) -DFUSE_USE_VERSION=35 $(FORTIFY) -I. $(shell $(PKGENV) $(PKG_CONFIG) --cflags $(PKGS) 2>/dev/null)
LDLIBS  := $(shell $(PKGENV) $(PKG_CONFIG) --libs $(PKGS) 2>/dev/null) -lpthread
VERSION := $(shell cat VERSION 2>/dev/null || echo 0.0.0)

# ---- platforms (issue 42; doc/architecture.md, "The platform seam") -----
# Every OS-specific call is in fleetfs/os/ (os.h says which is which).
#   make PLATFORM=portable   the seam's portable fallbacks on Linux (a pipe
#                            for eventfd, stat stamps for inotify, socket+
#                            fcntl, a close loop, fsync), in build/portable:
#                            the code a Mac runs, run by CI on Linux
#   make cross-macos         every product file and unit test compiled (not
#                            linked) for aarch64-macos and x86_64-macos with
#                            zig cc from npm (scripts/cross-macos)
PLATFORM ?=
ifeq ($(PLATFORM),portable)
ifneq ($(origin B),command line)
B := build/portable
endif
endif
# build/portable holds the portable build however it is asked for (a test's
# `make install B=build/portable` too): never Linux objects mixed in; so
# does build/san (make san: ASan on the fallbacks)
ifneq ($(filter portable,$(PLATFORM))$(filter build/portable build/san,$(B)),)
CPPFLAGS += -DFLEETFS_PORTABLE
endif
.DEFAULT_GOAL := all
.PHONY: cross-macos
cross-macos:
	@scripts/cross-macos

LIBSRC  := $(filter-out fleetfs/start/main.c,$(wildcard fleetfs/*.c fleetfs/*/*.c broker/*.c herdr/*.c))
HDRS    := $(wildcard */*.h fleetfs/*/*.h)
LIBOBJ  := $(LIBSRC:%.c=$(B)/obj/%.o)
UNITSRC := $(wildcard tests/unit/test_*.c)
UNITBIN := $(UNITSRC:tests/unit/%.c=$(B)/tests/%)
TOOLSRC := $(wildcard tests/tools/*.c)
TOOLBIN := $(TOOLSRC:tests/tools/%.c=$(B)/tools/%)
FAKESRC := $(wildcard tests/fake_herdr/*.c)
BENCHSRC := $(wildcard tests/bench/*.c)
BENCHBIN := $(BENCHSRC:tests/bench/%.c=$(B)/bench-bin/%)

.PHONY: all san test unit integration faults soak run demo demo-fleet bench bench-fleet clean fuzz install uninstall check deb selftest
all: $(B)/fleetfs $(UNITBIN) $(TOOLBIN) $(if $(FAKESRC),$(B)/fake-herdr)

# evaluated only when a build needs it (in the recipe below)
PKG_MISSING = $(foreach p,$(PKGS),$(if $(shell $(PKGENV) $(PKG_CONFIG) --exists $(p) 2>/dev/null && echo y),,$(p)))
.PHONY: deps-check
deps-check:
ifneq ($(PKG_OK),yes)
	@echo "make: cannot build: $(if $(shell command -v $(PKG_CONFIG) 2>/dev/null),pkg-config finds no $(PKG_MISSING),$(PKG_CONFIG) is not installed) (the -dev packages of $(PKGS)); run scripts/install-deps (make run does)" >&2; exit 1
endif

$(B)/obj/%.o: %.c $(HDRS) Makefile | deps-check
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -DFLEETFS_VERSION='"$(VERSION)"' $(CFLAGS) $(WARN) -c $< -o $@

$(B)/libfleetfs.a: $(LIBOBJ)
	@rm -f $@
	ar rcs $@ $^

$(B)/fleetfs: $(B)/obj/fleetfs/start/main.o $(B)/libfleetfs.a
	$(CC) $(LDSAN) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(B)/tests/%: tests/unit/%.c $(B)/libfleetfs.a $(HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(WARN) -o $@ $< $(B)/libfleetfs.a $(LDSAN) $(LDLIBS) -lcmocka

$(B)/tools/%: tests/tools/%.c $(B)/libfleetfs.a $(HDRS) $(wildcard tests/tools/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(WARN) -o $@ $< $(B)/libfleetfs.a $(LDSAN) $(LDLIBS)

$(B)/fake-herdr: $(FAKESRC) $(wildcard tests/fake_herdr/*.h) $(B)/libfleetfs.a
	$(CC) $(CPPFLAGS) $(CFLAGS) $(WARN) -o $@ $(FAKESRC) $(B)/libfleetfs.a $(LDSAN) $(LDLIBS)

$(B)/bench-bin/%: tests/bench/%.c $(wildcard tests/bench/*.h) | deps-check
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(WARN) -o $@ $< $(LDSAN) $(LDLIBS)

# The benchmark (doc/benchmarks.md); BENCH_SCALE=smoke for a seconds-long run.
bench: $(B)/fleetfs $(BENCHBIN) $(B)/tools/hbpub $(B)/tools/amqptry $(B)/tools/fake-agent
	@FLEETFS_BUILD=$(B) scripts/bench

# What presence costs the broker as the fleet grows (doc/scaling.md); minutes.
bench-fleet: $(B)/fleetfs $(BENCHBIN) $(B)/tools/hbpub $(B)/tools/amqptry
	@FLEETFS_BUILD=$(B) scripts/bench-fleet

# The ASan/UBSan build is also the portable one (PLATFORM=portable: the
# seam's fallbacks, os_posix.c), so that make test's ASan integration run
# is the run of the whole suite on the code a Mac runs, while the plain
# build runs it on Linux's calls (doc/testing.md, "The platform seam").
# ASan on os_linux.c instead: make B=build/san-linux SAN=1
san:
	$(MAKE) B=build/san SAN=1 PLATFORM=portable all

# libFuzzer targets (clang) on a copy of tests/fuzz/corpus; FUZZ_SECONDS each
FUZZ_SECONDS ?= 300
fuzz:
	@scripts/fuzz $(FUZZ_SECONDS)

unit: all
	@scripts/run-unit $(B)

integration: all
	@FLEETFS_BUILD=$(B) tests/integration/run

# Fault and cluster tests with exact reconciliation (tests/faults/); the
# ones listed in tests/faults/KNOWN_BROKEN print SKIP with their defect.
faults: all
	@FLEETFS_BUILD=$(B) tests/faults/run

# The same, longer: FAULT_SCALE (default 10) times the streams and loops,
# 20000 arrivals and 50000 waiting for the memory test; FAULT_KNOWN_BROKEN=
# (empty) runs the known-broken ones too.
FAULT_SCALE ?= 10
# issue 16's broker faults that are integration tests, not streams: t0370
# and t0392 take FAULT_SCALE times the messages, the others run as ever
SOAK_INTEGRATION = t0370 t0372 t0374 t0390 t0392
soak: all
	@rc=0; FAULT_SCALE=$(FAULT_SCALE) FLEET_TEST_TIMEOUT=3600 FLEETFS_BUILD=$(B) tests/faults/run || rc=1; \
	FAULT_SCALE=$(FAULT_SCALE) FLEET_TEST_TIMEOUT=3600 FLEETFS_BUILD=$(B) \
	  tests/integration/run $(SOAK_INTEGRATION) || rc=1; \
	FLEET_UNIT_ONLY=test_mailbox FLEET_UNIT_RECEIPT_FLOOD=20000 \
	  FLEET_UNIT_WRAP="valgrind -q --error-exitcode=9 --leak-check=full --errors-for-leak-kinds=definite" \
	  scripts/run-unit $(B) || rc=1; exit $$rc

# The whole suite, plain then under ASan/UBSan. Each part prints its own
# "N passed, N failed" line; the last line is the total.
test:
	@scripts/run-tests

# The layers of SPEC section 1 (scripts/check-layers prints its rules,
# doc/architecture.md draws them): broker/ and herdr/ include nothing of
# fleetfs/ but the base (log, errors, durations), nor each other; inside
# fleetfs/, store/ and wire/ reach nothing above them, model/ nothing of the
# face and the broker only through its seam (part of make test); every C
# file is as clang-format 14 makes it from .clang-format (scripts/check-format); and every
# source file names the license, Apache-2.0, in an SPDX line (scripts/check-spdx);
# and no product C file is over 1000 lines (scripts/check-size); and each
# document of doc/ over 300 lines opens with the contents list of its ##
# headings, current (scripts/doc-contents --check; scripts/doc-contents
# writes them); and no files of one folder call one another in a circle
# (scripts/check-circles, read from the objects: it builds first).
# FLEET_CHECK_ROOT=DIR runs the first five on another tree (t0002 plants in a copy).
check: all
	@rc=0; scripts/check-layers || rc=1; scripts/check-format || rc=1; scripts/check-spdx || rc=1; scripts/check-size || rc=1; scripts/doc-contents --check || rc=1; scripts/check-circles $(B)/obj || rc=1; exit $$rc

run:
	@scripts/run

# Mount, send to self, read, status, unmount: ok or failed each (doc/macos.md,
# "Self-test"); against FLEET_BROKER_URI (or ~/.config/fleetfs/broker.env),
# or SELFTEST=--local: a private broker of its own, as make run starts one.
selftest: $(B)/fleetfs
	@FLEETFS=$(B)/fleetfs scripts/selftest $(SELFTEST)

# Two leads on one machine; a message from alpha typed into beta's tmux pane.
demo: $(B)/fleetfs $(B)/tools/fake-agent
	@FLEETFS_BUILD=$(B) scripts/demo

# ---- install ------------------------------------------------------------
# make install [PREFIX=/usr/local] [DESTDIR=...]: everything below goes to
# $(DESTDIR)$(PREFIX)/...; the units name $(BINDIR) and $(SYSCONFDIR) as
# they will be on the target (without DESTDIR). systemd looks for units in
# /usr/local/lib/systemd/{system,user} as well as /usr/lib/systemd/...
# mount.fuse3 (from fuse3) runs `fleetfs` for `-t fuse.fleetfs` through
# /bin/sh with mount(8)'s cleared PATH, so PREFIX must be /usr/local or
# /usr for fstab mounts (fleetfs(1), FILES).
PREFIX     ?= /usr/local
BINDIR     ?= $(PREFIX)/bin
MANDIR     ?= $(PREFIX)/share/man
DOCDIR     ?= $(PREFIX)/share/doc/fleetfs
SYSCONFDIR ?= /etc
SYSTEMD_SYSTEM_DIR ?= $(PREFIX)/lib/systemd/system
SYSTEMD_USER_DIR   ?= $(PREFIX)/lib/systemd/user
UNITS_SYSTEM := fleetfs@.service
UNITS_USER   := fleetfs.service
DOCS       := README LICENSE $(wildcard doc/*.md)
MANS       := doc/fleetfs.1 doc/fleetfs-broker.1
SUBST      := sed -e 's|@BINDIR@|$(BINDIR)|g' -e 's|@SYSCONFDIR@|$(SYSCONFDIR)|g' \
              -e 's|@DOCDIR@|$(DOCDIR)|g'

# macOS (uname -s: Darwin) gets a launchd agent instead of the systemd units
# (doc/macos.md, "Running it for good"): LAUNCHD_DIR/LAUNCHD_LABEL.plist,
# by default in the installing user's ~/Library/LaunchAgents, which launchd
# loads at each login of that user (now: launchctl bootstrap gui/$(id -u)
# FILE); it runs FLEETLIBDIR/fleetfs-agent, which mounts ~/fleet with the
# fleetfs of BINDIR. Run make install as that user (not with sudo: HOME
# decides LAUNCHD_DIR and LAUNCHD_LOG), with a PREFIX you can write, e.g.
# PREFIX=$HOME/.local. LAUNCHD_DIR=/Library/LaunchAgents (sudo) loads it
# for every user who logs in; LAUNCHD_LOG must then be a file every one of
# them can write. make uninstall boots it out of launchd first (when no
# DESTDIR) and removes the plist.
LAUNCHD_LABEL ?= local.fleetfs
LAUNCHD_DIR   ?= $(HOME)/Library/LaunchAgents
LAUNCHD_LOG   ?= $(HOME)/Library/Logs/fleetfs.log
LSUBST      = $(SUBST) -e 's|@FLEETLIBDIR@|$(FLEETLIBDIR)|g' -e 's|@LABEL@|$(LAUNCHD_LABEL)|g' \
              -e 's|@LAUNCHD_DIR@|$(LAUNCHD_DIR)|g' -e 's|@LAUNCHD_LOG@|$(LAUNCHD_LOG)|g'
ifeq ($(UNAME_S),Darwin)
SERVICE_DIRS = $(DESTDIR)$(LAUNCHD_DIR) $(DESTDIR)$(dir $(LAUNCHD_LOG))
else
SERVICE_DIRS = $(DESTDIR)$(SYSTEMD_SYSTEM_DIR) $(DESTDIR)$(SYSTEMD_USER_DIR)
endif

# scripts/broker is installed as fleetfs-broker, the operator's command for
# the hosts' broker logins (`fleetfs-broker host add NAME`, fleetfs-broker(1));
# it finds the fleetfs installed beside it, and its LavinMQ half
# (scripts/broker-lavinmq, sourced) in ../lib/fleetfs/.
FLEETLIBDIR ?= $(PREFIX)/lib/fleetfs
install: $(B)/fleetfs
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(DOCDIR) \
	    $(SERVICE_DIRS) $(DESTDIR)$(FLEETLIBDIR)
	install -m 0755 $(B)/fleetfs $(DESTDIR)$(BINDIR)/fleetfs
	install -m 0755 scripts/broker $(DESTDIR)$(BINDIR)/fleetfs-broker
	install -m 0644 scripts/broker-lavinmq $(DESTDIR)$(FLEETLIBDIR)/broker-lavinmq
	install -m 0644 $(MANS) $(DESTDIR)$(MANDIR)/man1/
	install -m 0644 $(DOCS) $(DESTDIR)$(DOCDIR)/
ifeq ($(UNAME_S),Darwin)
	install -m 0755 scripts/launchd/fleetfs-agent $(DESTDIR)$(FLEETLIBDIR)/fleetfs-agent
	$(LSUBST) scripts/launchd/fleetfs.plist.in >$(DESTDIR)$(LAUNCHD_DIR)/$(LAUNCHD_LABEL).plist
	chmod 0644 $(DESTDIR)$(LAUNCHD_DIR)/$(LAUNCHD_LABEL).plist
else
	$(foreach u,$(UNITS_SYSTEM),$(SUBST) scripts/systemd/$(u).in >$(DESTDIR)$(SYSTEMD_SYSTEM_DIR)/$(u) && \
	    chmod 0644 $(DESTDIR)$(SYSTEMD_SYSTEM_DIR)/$(u) &&) true
	$(foreach u,$(UNITS_USER),$(SUBST) scripts/systemd/$(u).in >$(DESTDIR)$(SYSTEMD_USER_DIR)/$(u) && \
	    chmod 0644 $(DESTDIR)$(SYSTEMD_USER_DIR)/$(u) &&) true
endif

# Removes exactly what install puts there (and the doc directory, which is
# fleetfs's own); shared directories such as bin/ stay.
uninstall:
	rm -f $(DESTDIR)$(BINDIR)/fleetfs $(DESTDIR)$(BINDIR)/fleetfs-broker
	rm -f $(DESTDIR)$(FLEETLIBDIR)/broker-lavinmq
ifeq ($(UNAME_S),Darwin)
	$(if $(DESTDIR),,-launchctl bootout gui/$$(id -u)/$(LAUNCHD_LABEL) 2>/dev/null)
	rm -f $(DESTDIR)$(FLEETLIBDIR)/fleetfs-agent $(DESTDIR)$(LAUNCHD_DIR)/$(LAUNCHD_LABEL).plist
endif
	-rmdir $(DESTDIR)$(FLEETLIBDIR)
	rm -f $(addprefix $(DESTDIR)$(MANDIR)/man1/,$(notdir $(MANS)))
	rm -f $(addprefix $(DESTDIR)$(DOCDIR)/,$(notdir $(DOCS)))
	-rmdir $(DESTDIR)$(DOCDIR)
ifneq ($(UNAME_S),Darwin)
	rm -f $(addprefix $(DESTDIR)$(SYSTEMD_SYSTEM_DIR)/,$(UNITS_SYSTEM))
	rm -f $(addprefix $(DESTDIR)$(SYSTEMD_USER_DIR)/,$(UNITS_USER))
endif

# The Debian package (scripts/deb says how it is laid out).
deb:
	@scripts/deb $(B)

# Three hosts (network namespaces) alpha, beta, gamma on one broker (needs root).
demo-fleet: $(B)/fleetfs
	@FLEETFS_BUILD=$(B) scripts/demo-fleet

clean:
	rm -rf build
