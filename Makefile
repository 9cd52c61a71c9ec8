# curd - top-level build.
#
#   make                 libcurd.so.1.1.0 (+ links), libcurd.a, the tools
#   make info            installs build deps if missing, builds, runs curd-info
#   make check           installs test deps if missing, then the whole suite:
#                        unit tests, Valgrind, fuzz smoke, ASan, TSan, exports
#   make check-plain     just the unit tests (what the Debian build runs)
#   make check-gpu       the unit tests with every skip counted as a failure
#   make check-asan      everything rebuilt in build-asan/ with ASan+UBSan
#   make check-tsan      the *thread* tests, the soak, test-comm-fake and
#                        test-pool (its /pool/front tests run threads) rebuilt
#                        in build-tsan/ with TSan
#   make check-exports   proves that libcurd.so exports only curd_* symbols
#   make check-layers    proves that every include in lib/ points down lib/LAYERS,
#                        folder by folder
#   make check-paths     proves that every header guard follows its path and
#                        every path the sources and docs name exists
#   make install         DESTDIR, PREFIX, LIBDIR, INCLUDEDIR, BINDIR, MANDIR
#                        honoured
#   make fake-driver     the stand-in libcuda and libnccl, for trying curd
#                        without a GPU (README.md says how)
#   make dist, source-package, bench-internal, bench-plot, check-examples,
#   check-manpages: see mk/*.mk
#
# V=1 shows the commands. Objects and programs go under $(BUILD)/.
#
# NVTX=0 compiles out the NVTX ranges that name curd's work in Nsight
# Systems (lib/base/nvtx.h; CURD_NVTX=0 turns them off at run time
# instead), into build-nvtx0/ unless BUILD says otherwise, so that both
# builds sit side by side: `make tools && make NVTX=0 tools`, then
# build/tools/curd-bench and build-nvtx0/tools/curd-bench in turn measure
# what the ranges cost with no profiler attached.

VERSION_MAJOR := $(shell sed -n 's/^\#define CURD_VERSION_MAJOR \([0-9]*\).*/\1/p' include/curd.h)
VERSION_MINOR := $(shell sed -n 's/^\#define CURD_VERSION_MINOR \([0-9]*\).*/\1/p' include/curd.h)
VERSION_PATCH := $(shell sed -n 's/^\#define CURD_VERSION_PATCH \([0-9]*\).*/\1/p' include/curd.h)
VERSION := $(VERSION_MAJOR).$(VERSION_MINOR).$(VERSION_PATCH)

PREFIX ?= /usr/local
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
BINDIR ?= $(PREFIX)/bin
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig

CC ?= cc
NVTX ?= 1
ifeq ($(NVTX),0)
BUILD ?= build-nvtx0
endif
BUILD ?= build
# Distribution builds may pass WERROR= to keep new compiler warnings from
# failing the build; development and CI builds keep -Werror.
WERROR ?= -Werror
WARNINGS := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
            -Wconversion -Wno-sign-conversion -Wformat-security $(WERROR)
CFLAGS ?= -O2 -g
# third_party/ holds NVIDIA's NVTX v3 headers (third_party/README.md says
# whence), included as <nvtx3/...> by lib/base/nvtx.c alone; -isystem keeps
# our warnings off their code.
CPPFLAGS += -Iinclude -Ilib -isystem third_party -D_GNU_SOURCE
ifeq ($(NVTX),0)
CPPFLAGS += -DCURDI_NVTX=0
endif
DEPFLAGS = -MMD -MP -MF $@.d
LIB_CFLAGS := -std=c11 -fPIC -fvisibility=hidden -DCURD_BUILDING $(WARNINGS)
LIBS := -ldl -lpthread
# Installs missing Debian packages (as root) or prints the apt-get line;
# SETUP=true skips it.
SETUP ?= scripts/setup-deps.sh

ifeq ($(V),1)
Q :=
else
Q := @
endif

SONAME := libcurd.so.$(VERSION_MAJOR)
SHARED := $(BUILD)/libcurd.so.$(VERSION)
STATIC := $(BUILD)/libcurd.a

LIB_SRCS := $(sort $(wildcard lib/*.c lib/*/*.c))
# The transfer kernels' PTX (lib/transfer/gather.ptx) becomes one more source, the
# string curdi_gather_ptx (rule below).
GATHER_PTX_C := $(BUILD)/lib/transfer/gather-ptx.c
LIB_OBJS := $(patsubst lib/%.c,$(BUILD)/lib/%.o,$(LIB_SRCS)) \
            $(BUILD)/lib/transfer/gather-ptx.o

GLIB_CFLAGS = $(shell pkg-config --cflags glib-2.0)
GLIB_LIBS = $(shell pkg-config --libs glib-2.0)

# Every tests/test-*.c is one g_test program; tests/support/*.c is linked
# into each of them.
TEST_SRCS := $(sort $(wildcard tests/test-*.c))
# The GPU tests: this list is the one place that says which tests need a
# GPU (tests/README.md). Each skips without one, and each is built twice
# from its one source, as itself and as its stand-in twin test-<name>-fake
# (compiled with -DCURD_TEST_ON_FAKE=1, tests/support/curd-test.h), which
# runs the same tests on the stand-in driver (tests/fake/), without a GPU,
# under Valgrind in make check. A list rather than a naming rule (a
# -gpu suffix, a folder): the programs' names are in the docs, the
# scripts and the GPU logs, and the list is where a new GPU test must be
# added anyway for its twin. Only test-comm-procs (two processes; the
# stand-in NCCL's ranks are threads of one) needs GPUs without a twin.
# tests/gpu/run-remote.sh reads the list from $(GPU_TESTS_LIST).
GPU_TESTS := test-batch test-comm test-copy test-device test-dispatch \
             test-dispatch-faults test-dispatch-telemetry test-fault-sweep \
             test-fence test-gather test-interop test-landing test-pool-gpu \
             test-program test-program-link test-resident-gpu test-session \
             test-nvtx test-session-faults test-shareable test-soak-gpu \
             test-transfer-faults test-transfer-gpu
GPU_TESTS_LIST = $(BUILD)/tests/gpu-tests.txt
test_bins = $(patsubst tests/%.c,$(1)/tests/%,$(TEST_SRCS)) \
            $(patsubst %,$(1)/tests/%-fake,$(GPU_TESTS))
FAKE_TWINS := $(patsubst %,$(BUILD)/tests/%-fake,$(GPU_TESTS))
TEST_BINS := $(call test_bins,$(BUILD))
TEST_SUPPORT_OBJS := $(patsubst tests/support/%.c,$(BUILD)/tests/support/%.o,\
                       $(sort $(wildcard tests/support/*.c)))
# Named only by the test programs' pattern rule, the support objects would
# be intermediate files to make: deleted after a build, so that the next
# `make tests` rebuilt them and relinked every test. `make check` proves
# that a second build does nothing (check-rebuild).
.SECONDARY: $(TEST_SUPPORT_OBJS)

# The tools use only the public header (no -Ilib) and link libcurd.so.1 like
# any consumer, so a fixed libcurd1 reaches them. $(BUILD)/tools/ copies find
# the libcurd.so.1 beside them in $(BUILD)/ through their RPATH; the copies in
# $(BUILD)/tools/install/, which `make install` installs, have none.
TOOL_CPPFLAGS = $(filter-out -Ilib,$(CPPFLAGS))
TOOLS := $(BUILD)/tools/curd-info $(BUILD)/tools/curd-bench
INSTALL_TOOLS := $(patsubst $(BUILD)/tools/%,$(BUILD)/tools/install/%,$(TOOLS))
INFO_OBJS := $(addprefix $(BUILD)/tools/,curd-info.o json-writer.o options.o)
# curd-bench lives in tools/curd-bench/ (its README.md says where what is);
# its objects go to $(BUILD)/bench/ (rules in mk/bench.mk). The harness,
# the raw baselines and the scenarios are shared with curd-bench-internal.
BENCH_HARNESS_OBJS := $(patsubst tools/curd-bench/%.c,$(BUILD)/bench/%.o,\
                        $(sort $(wildcard tools/curd-bench/harness/*.c \
                                          tools/curd-bench/raw/*.c \
                                          tools/curd-bench/scenarios/*.c))) \
                      $(BUILD)/tools/json-writer.o $(BUILD)/tools/options.o
BENCH_OBJS := $(BUILD)/bench/curd-bench.o $(BENCH_HARNESS_OBJS)

.PHONY: all lib tools tests info check check-plain check-gpu check-asan \
        check-tsan check-exports check-layers check-paths install uninstall \
        clean
all: lib tools

# ---------------------------------------------------------------------------
# The library

lib: $(SHARED) $(STATIC)

$(BUILD)/lib/%.o: lib/%.c
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) $(LIB_CFLAGS) $(DEPFLAGS) -c $< -o $@

# lib/transfer/gather.cu's PTX, committed beside it (`make kernels-ptx` regenerates
# it with nvcc; the build never needs nvcc), as one C string, line by line.
$(GATHER_PTX_C): lib/transfer/gather.ptx
	@mkdir -p $(dir $@)
	@echo "  GEN     $@"
	$(Q){ echo "/* Generated by the Makefile from lib/transfer/gather.ptx. */"; \
	  echo "#include \"transfer/gather.h\""; \
	  echo "const char curdi_gather_ptx[] ="; \
	  sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/    "/' -e 's/$$/\\n"/' $<; \
	  echo "    ;"; } > $@.tmp && mv $@.tmp $@

$(BUILD)/lib/transfer/gather-ptx.o: $(GATHER_PTX_C)
	@echo "  CC      $<"
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) $(LIB_CFLAGS) $(DEPFLAGS) -c $< -o $@

$(SHARED): $(LIB_OBJS) lib/curd.map
	@echo "  LD      $@"
	$(Q)$(CC) -shared $(CFLAGS) $(LDFLAGS) -Wl,-soname,$(SONAME) \
	    -Wl,--version-script=lib/curd.map -Wl,--no-undefined \
	    -o $@ $(LIB_OBJS) $(LIBS)
	$(Q)ln -sf libcurd.so.$(VERSION) $(BUILD)/$(SONAME)
	$(Q)ln -sf $(SONAME) $(BUILD)/libcurd.so

$(STATIC): $(LIB_OBJS)
	@echo "  AR      $@"
	$(Q)rm -f $@ && $(AR) rcs $@ $(LIB_OBJS)

# ---------------------------------------------------------------------------
# Tools

tools: $(TOOLS) $(INSTALL_TOOLS)

$(BUILD)/tools/curd-info $(BUILD)/tools/install/curd-info: $(INFO_OBJS)
$(BUILD)/tools/curd-bench $(BUILD)/tools/install/curd-bench: $(BENCH_OBJS)
# curd-bench loads the raw driver itself (dlopen) and times threads.
$(BUILD)/tools/curd-bench $(BUILD)/tools/install/curd-bench: TOOL_LIBS := -ldl -lpthread -lm
$(TOOLS): $(SHARED)
	@echo "  LD      $@"
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) $(filter %.o,$^) -o $@ -L$(BUILD) -lcurd \
	    $(TOOL_LIBS) -Wl,-rpath,'$$ORIGIN/..'
$(INSTALL_TOOLS): $(SHARED)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) $(filter %.o,$^) -o $@ -L$(BUILD) -lcurd \
	    $(TOOL_LIBS)

$(BUILD)/tools/%.o: tools/%.c
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	$(Q)$(CC) $(TOOL_CPPFLAGS) $(CFLAGS) -std=c11 $(WARNINGS) $(DEPFLAGS) -c $< -o $@

# Without a driver or a device (curd-info's exit 3) the sentence ends by
# pointing at the stand-in driver (README.md, "Trying curd without a GPU").
INFO_NO_GPU_HINT := To try curd without a GPU: make fake-driver, then follow \
    README.md, section Trying curd without a GPU.
# When curd-info fails (no driver, say), `make info` ends with its one
# sentence and a non-zero status: make cannot fail a recipe without adding
# its own "*** [...] Error N" line, so the sentence is kept in
# $(BUILD)/info.failed and info's recipe, expanded once info-report has
# run, hands it to $(error) instead.
.PHONY: info-report
info: info-report
	$(if $(shell cat $(BUILD)/info.failed 2>/dev/null),$(error $(shell sed 's/\.$$//' $(BUILD)/info.failed)))
info-report:
	$(Q)$(SETUP) build
	$(Q)$(MAKE) --no-print-directory $(if $(Q),-s) lib $(BUILD)/tools/curd-info
	$(Q)rm -f $(BUILD)/info.failed; status=0; \
	    $(BUILD)/tools/curd-info 2>$(BUILD)/info.stderr || status=$$?; \
	    if [ $$status -eq 0 ]; then cat $(BUILD)/info.stderr >&2; \
	    elif [ -s $(BUILD)/info.stderr ]; then \
	        { tr -d '\n' <$(BUILD)/info.stderr; \
	          if [ $$status -eq 3 ]; then printf ' %s' "$(INFO_NO_GPU_HINT)"; fi; \
	          echo; } >$(BUILD)/info.failed; \
	    else echo "curd-info exited $$status" >$(BUILD)/info.failed; fi

# ---------------------------------------------------------------------------
# Tests

tests: $(TEST_BINS)

$(BUILD)/tests/support/%.o: tests/support/%.c
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	$(Q)$(CC) $(CPPFLAGS) -Itests $(GLIB_CFLAGS) $(CFLAGS) -std=gnu11 $(WARNINGS) \
	    $(TEST_EXTRA_CFLAGS) $(DEPFLAGS) -c $< -o $@

# $(call test_program,FLAGS): one test program from its one source $<.
test_program = $(CC) $(CPPFLAGS) -Itests $(GLIB_CFLAGS) $(CFLAGS) -std=gnu11 $(WARNINGS) \
    $(TEST_EXTRA_CFLAGS) $(1) $(DEPFLAGS) $< $(TEST_SUPPORT_OBJS) $(TEST_EXTRA_OBJS) -o $@ \
    $(LDFLAGS) $(STATIC) $(GLIB_LIBS) $(LIBS) -lm

$(BUILD)/tests/%: tests/%.c $(TEST_SUPPORT_OBJS) $(STATIC)
	@mkdir -p $(dir $@)
	@echo "  CC      $@"
	$(Q)$(call test_program,)

# The stand-in twins of the GPU tests (GPU_TESTS above).
$(FAKE_TWINS): $(BUILD)/tests/%-fake: tests/%.c $(TEST_SUPPORT_OBJS) $(STATIC)
	@mkdir -p $(dir $@)
	@echo "  CC      $@"
	$(Q)$(call test_program,-DCURD_TEST_ON_FAKE=1)

# The GPU tests by name, one a line, for tests/gpu/run-remote.sh (which
# runs where there is no make) and tests/gpu/pack.sh.
$(GPU_TESTS_LIST): Makefile
	@mkdir -p $(dir $@)
	@echo "  GEN     $@"
	$(Q)printf '%s\n' $(GPU_TESTS) > $@
tests: $(GPU_TESTS_LIST)

# tests/test-json-writer tests the tools' JSON writer, which is no part of
# the library: it links that one object too.
$(BUILD)/tests/test-json-writer: $(BUILD)/tools/json-writer.o
$(BUILD)/tests/test-json-writer: TEST_EXTRA_CFLAGS += -Itools
$(BUILD)/tests/test-json-writer: TEST_EXTRA_OBJS := $(BUILD)/tools/json-writer.o

# tests/test-cuda-abi also compiles the CUDA toolkit's own cuda.h, when there
# is one, to check the library's declarations against it. The build never
# needs it.
CUDA_HOME ?= /usr/local/cuda
ifneq ($(wildcard $(CUDA_HOME)/include/cuda.h),)
$(BUILD)/tests/test-cuda-abi: TEST_EXTRA_CFLAGS += -DCURD_HAVE_CUDA_H -isystem $(CUDA_HOME)/include
endif

# A stand-in libcuda (tests/fake/) for tests that need a driver but no GPU;
# the test programs find it beside themselves.
FAKE_CUDA := $(BUILD)/tests/libcuda-fake.so.1
$(FAKE_CUDA): tests/fake/fake-cuda.c tests/fake/fake-kernels.c tests/fake/fake.h lib/driver/cuda_abi.h \
              lib/transfer/gather.h
	@mkdir -p $(dir $@)
	@echo "  CC      $@"
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) -std=gnu11 -fPIC -shared $(WARNINGS) $(filter %.c,$^) -o $@ -lpthread -lm
tests: $(FAKE_CUDA)

# A stand-in libnccl (tests/fake/fake-nccl.c) on that driver: ranks are
# threads, collectives are computed on the host. -fwrapv: integer sums and
# products wrap, as they do on a GPU.
FAKE_NCCL := $(BUILD)/tests/libnccl-fake.so.2
$(FAKE_NCCL): tests/fake/fake-nccl.c tests/support/float16.h lib/driver/nccl_abi.h \
              lib/driver/cuda_abi.h
	@mkdir -p $(dir $@)
	@echo "  CC      $@"
	$(Q)$(CC) $(CPPFLAGS) -Itests $(CFLAGS) -std=gnu11 -fPIC -fwrapv -shared $(WARNINGS) $(filter %.c,$^) -o $@ -lpthread -ldl
tests: $(FAKE_NCCL)

# A stand-in for a profiler's NVTX injection library (tests/fake/
# nvtx-recorder.c): tests/test-nvtx points NVTX_INJECTION64_PATH at it and
# reads the ranges curd pushed.
NVTX_RECORDER := $(BUILD)/tests/libnvtx-recorder.so
$(NVTX_RECORDER): tests/fake/nvtx-recorder.c third_party/nvtx3/nvToolsExt.h
	@mkdir -p $(dir $@)
	@echo "  CC      $@"
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) -std=gnu11 -fPIC -shared -fvisibility=hidden $(WARNINGS) $< -o $@ -lpthread
tests: $(NVTX_RECORDER)

# The stand-ins alone, for trying curd (the examples, curd-info,
# curd-bench, a program of your own) on a host without a GPU: README.md,
# "Trying curd without a GPU".
.PHONY: fake-driver
fake-driver: $(FAKE_CUDA) $(FAKE_NCCL)
	@echo "stand-in driver: CURD_LIBCUDA=$(abspath $(FAKE_CUDA))"
	@echo "stand-in NCCL:   CURD_LIBNCCL=$(abspath $(FAKE_NCCL))"

# The Valgrind run hides the driver (CURD_LIBCUDA points nowhere), so it
# covers exactly the suite that needs no GPU, even on a GPU host.
VALGRIND := CURD_LIBCUDA=/nonexistent/libcuda.so.1 \
    G_SLICE=always-malloc G_DEBUG=gc-friendly \
    valgrind --quiet --leak-check=full --show-leak-kinds=definite,indirect \
    --errors-for-leak-kinds=definite,indirect --error-exitcode=1 \
    --num-callers=30 --suppressions=tests/valgrind.supp \
    $(addprefix --suppressions=,$(wildcard /usr/share/glib-2.0/valgrind/glib.supp))

# A fuzz step that exits 77 counts as skipped (fuzz/fuzz.mk not there yet).
FUZZ_SMOKE_STEP = if [ -f fuzz/fuzz.mk ]; then $(MAKE) --no-print-directory fuzz-smoke; \
                  else echo "fuzz/fuzz.mk not present"; exit 77; fi

# The sanitizer runs are one step each in `make check`: the log stays in
# $(BUILD)/; shown are its summary line and, on a failure, what is not a
# pass or a comment (failed tests, sanitizer reports).
# While it runs, the step shows run-tests.sh's "[N/M] program" lines, so
# that a terminal or a CI log sees which program the sanitizer is on.
sanitizer_step = mkdir -p $(BUILD) && echo "building and running in $(1:check-%=build-%)/" && \
                 { $(MAKE) --no-print-directory $(DEFAULT_JOBS) $(1) 2>&1; echo $$? >$(BUILD)/$(1).status; } \
                 | tee $(BUILD)/$(1).log | grep --line-buffered -E "^\# \[[0-9]+/[0-9]+\] "; \
                 status=$$(cat $(BUILD)/$(1).status); \
                 [ $$status -eq 0 ] || grep -v -e "^ok " -e "^\#" -e "^1\.\." $(BUILD)/$(1).log | tail -n 80; \
                 grep -E "^[0-9]+ passed, " $(BUILD)/$(1).log; echo "log: $(BUILD)/$(1).log"; exit $$status

# `make check` builds in parallel unless the command line gave its own -j:
# -j as many as there are processors (MAKEFLAGS only shows -j to recipes).
DEFAULT_JOBS = $$(case " $$MAKEFLAGS " in *" -j"*) ;; *) echo -j$$(nproc) ;; esac)

# The last line `make check` prints is the one summary of every step.
check:
	$(Q)$(SETUP) check
	$(Q)$(MAKE) --no-print-directory $(if $(Q),-s) $(DEFAULT_JOBS) all tests
	$(Q)tests/run-tests.sh --valgrind '$(VALGRIND)' \
	    --step fuzz-smoke '$(FUZZ_SMOKE_STEP)' \
	    --step check-asan '$(call sanitizer_step,check-asan)' \
	    --step check-tsan '$(call sanitizer_step,check-tsan)' \
	    --step check-exports 'scripts/check-exports.sh $(SHARED)' \
	    --step check-layers 'scripts/check-layers.sh' \
	    --step check-paths 'scripts/check-paths.sh' \
	    --step check-rebuild '$(MAKE) --no-print-directory check-rebuild' \
	    --step check-run-tests 'scripts/check-run-tests.sh' \
	    --step check-run-remote '$(MAKE) --no-print-directory check-run-remote' \
	    --step check-manpages 'scripts/check-manpages.sh' \
	    --step check-dist 'scripts/make-dist.sh $(VERSION) $(BUILD)/dist-check' \
	    --step check-examples '$(MAKE) --no-print-directory check-examples' \
	    --step check-exit-codes '$(MAKE) --no-print-directory check-exit-codes' \
	    --step bench-smoke '$(MAKE) --no-print-directory bench-smoke' \
	    --step check-bench-plot '$(MAKE) --no-print-directory check-bench-plot' \
	    $(TEST_BINS)

check-plain: tests
	$(Q)tests/run-tests.sh $(TEST_BINS)

check-gpu: tests
	$(Q)CURD_REQUIRE_GPU=1 tests/run-tests.sh --skip-is-failure $(TEST_BINS)

check-exports: $(SHARED)
	$(Q)scripts/check-exports.sh $(SHARED)

check-layers:
	$(Q)scripts/check-layers.sh

check-paths:
	$(Q)scripts/check-paths.sh

# tests/gpu/run-remote.sh's summary on the stand-in driver, with stand-ins
# for compute-sanitizer and nvidia-smi (tests/fake/bin/).
.PHONY: check-run-remote
check-run-remote: tests $(TOOLS) example-programs
	$(Q)scripts/check-run-remote.sh $(BUILD)

# After a build, a second `make all tests` has nothing to do (make -q);
# otherwise this names what it would still run.
.PHONY: check-rebuild
check-rebuild:
	$(Q)if $(MAKE) --no-print-directory -q all tests; then \
	    echo "check-rebuild: after a build, make all tests has nothing to do"; \
	else \
	    echo "check-rebuild: make all tests after a build would still run:"; \
	    $(MAKE) --no-print-directory -n all tests | grep -v '^echo\|^mkdir' | head -n 20; \
	    exit 1; \
	fi

# The sanitizer builds (and fuzz/fuzz.mk's) also check the library's own
# invariants: -DCURDI_DEBUG turns CURDI_ASSERT on (lib/base/assert.h); the
# release build never aborts.
DEBUG_ASSERT_FLAGS := -DCURDI_DEBUG
ASAN_FLAGS := -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer \
              -fno-sanitize-recover=undefined $(DEBUG_ASSERT_FLAGS)
check-asan:
	$(Q)$(MAKE) --no-print-directory $(if $(Q),-s) BUILD=build-asan CFLAGS='$(ASAN_FLAGS)' \
	    LDFLAGS='-fsanitize=address,undefined' all tests
	$(Q)ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	    tests/run-tests.sh $(call test_bins,build-asan)

# ThreadSanitizer needs clang here and a fixed address layout on some
# kernels, hence setarch -R when it is available.
TSAN_BINS := $(patsubst tests/%.c,build-tsan/tests/%,$(wildcard tests/test-*thread*.c) \
               tests/test-pool.c) \
             build-tsan/tests/test-soak-gpu-fake build-tsan/tests/test-comm-fake
TSAN_RUN := $(shell command -v setarch >/dev/null 2>&1 && echo 'setarch $(shell uname -m) -R')
check-tsan:
	$(if $(TSAN_BINS),,@echo "# no tests/test-*thread*.c yet")
	$(Q)$(MAKE) --no-print-directory $(if $(Q),-s) BUILD=build-tsan CC=clang \
	    CFLAGS='-O1 -g -fsanitize=thread $(DEBUG_ASSERT_FLAGS)' LDFLAGS=-fsanitize=thread \
	    build-tsan/libcurd.a build-tsan/tests/libcuda-fake.so.1 \
	    build-tsan/tests/libnccl-fake.so.2 $(TSAN_BINS)
	$(Q)TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
	    tests/run-tests.sh --wrap '$(TSAN_RUN)' $(TSAN_BINS)

# ---------------------------------------------------------------------------
# Install

install: all
	install -d $(DESTDIR)$(LIBDIR) $(DESTDIR)$(PKGCONFIGDIR) $(DESTDIR)$(INCLUDEDIR)
	install -m 0644 $(SHARED) $(STATIC) $(DESTDIR)$(LIBDIR)/
	ln -sf libcurd.so.$(VERSION) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/libcurd.so
	install -m 0644 include/curd.h include/curd_comm.h $(DESTDIR)$(INCLUDEDIR)/
	sed -e 's|@prefix@|$(PREFIX)|' -e 's|@libdir@|$(LIBDIR)|' \
	    -e 's|@includedir@|$(INCLUDEDIR)|' -e 's|@version@|$(VERSION)|' \
	    pkgconfig/curd.pc.in > $(DESTDIR)$(PKGCONFIGDIR)/curd.pc
ifneq ($(INSTALL_TOOLS),)
	install -d $(DESTDIR)$(BINDIR)
	install -m 0755 $(INSTALL_TOOLS) $(DESTDIR)$(BINDIR)/
endif

uninstall:
	rm -f $(DESTDIR)$(LIBDIR)/libcurd.so.$(VERSION) \
	    $(DESTDIR)$(LIBDIR)/$(SONAME) $(DESTDIR)$(LIBDIR)/libcurd.so \
	    $(DESTDIR)$(LIBDIR)/libcurd.a $(DESTDIR)$(INCLUDEDIR)/curd.h \
	    $(DESTDIR)$(INCLUDEDIR)/curd_comm.h \
	    $(DESTDIR)$(PKGCONFIGDIR)/curd.pc \
	    $(DESTDIR)$(BINDIR)/curd-info $(DESTDIR)$(BINDIR)/curd-bench

clean:
	rm -rf $(BUILD) build-asan build-tsan build-nvtx0

# Fuzz targets (`make fuzz`, `make fuzz-smoke`); fuzz/fuzz.mk is the fuzz
# harness's own.
-include fuzz/fuzz.mk
# The kernel harness (tests/kernels/): its PTX for the tests, `make kernels-ptx`.
-include tests/kernels/kernels.mk
include mk/bench.mk mk/dist.mk mk/man.mk mk/examples.mk

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
