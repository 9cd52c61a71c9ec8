# fuzz/fuzz.mk - the libFuzzer targets; included by the top-level Makefile.
#
#   make fuzz            every target for FUZZ_SECONDS (default 300) each
#   make fuzz-smoke      every target for FUZZ_SMOKE_SECONDS (default 8)
#                        each: the short run `make check` does
#   make fuzz-NAME       one target for FUZZ_SECONDS (fuzz-smoke-NAME: short)
#   make fuzz-build      build them all, run nothing
#
# Every fuzz/fuzz-NAME.c is a target NAME (found by wildcard), built as
# $(BUILD)/fuzz/fuzz-NAME from the harness and only the lib sources it
# needs, all compiled here with clang and the fuzz sanitizers; the library
# build is not involved. The sources are, first found:
#   FUZZ_SRCS_NAME         set below or on the command line;
#   a line " * fuzz-srcs: lib/a.c lib/b.c" in the harness's top comment;
#   FUZZ_SRCS_DEFAULT.
# New inputs a run finds go to $(BUILD)/fuzz/corpus/NAME; the seeds in
# fuzz/corpus/NAME are read, never written. A failing input lands in
# $(BUILD)/fuzz/artifacts/ (replay: $(BUILD)/fuzz/fuzz-NAME FILE). Each
# harness aborts on any disagreement with its reference.

FUZZ_CC ?= clang
FUZZ_SECONDS ?= 300
FUZZ_SMOKE_SECONDS ?= 8
FUZZ_DIR := $(BUILD)/fuzz
FUZZ_SANITIZE := -fsanitize=address,undefined -fno-sanitize-recover=all
# -DCURDI_DEBUG: the library's CURDI_ASSERTs are checked (lib/base/assert.h).
FUZZ_CFLAGS := -g -O1 -fno-omit-frame-pointer -std=c11 -DCURD_BUILDING -DCURDI_DEBUG \
               $(FUZZ_SANITIZE) -fsanitize=fuzzer-no-link $(WARNINGS)
FUZZ_LDFLAGS := $(FUZZ_SANITIZE) -fsanitize=fuzzer
# -timeout: a single input slower than this is a bug (a hang).
FUZZ_RUN_FLAGS := -timeout=10 -rss_limit_mb=2048 -print_final_stats=1

FUZZ_SRCS_DEFAULT := lib/base/checked.c lib/base/status.c lib/driver/driver.c
# The pool's modules, whatever files it is split into.
FUZZ_SRCS_pool ?= $(sort $(wildcard lib/memory/pool*.c)) lib/base/hash_map.c lib/base/clock.c lib/base/checked.c lib/base/status.c lib/driver/driver.c
# The whole library, whatever modules it has, and the generated PTX string.
FUZZ_SRCS_transfer-validate ?= $(LIB_SRCS) $(GATHER_PTX_C)
FUZZ_SRCS_launch ?= $(LIB_SRCS) $(GATHER_PTX_C)
FUZZ_SRCS_session ?= $(LIB_SRCS) $(GATHER_PTX_C)
# The fault sweep's list, world and invariants (tests/support/api-*.c),
# and the fault injection and live counts they use.
FUZZ_SWEEP_SRCS := $(addprefix tests/support/,api-ops.c api-sweep.c \
                     api-world.c driver-faults.c fake-live.c kernel-load.c \
                     nccl-faults.c)
FUZZ_SRCS_api-faults ?= $(LIB_SRCS) $(GATHER_PTX_C) $(FUZZ_SWEEP_SRCS)
# They include tests/support/ headers, and kernel-load.c the harness
# kernels' PTX (tests/kernels/kernels.mk generates the header).
FUZZ_SWEEP_OBJS := $(patsubst %.c,$(FUZZ_DIR)/%.o,fuzz/fuzz-api-faults.c $(FUZZ_SWEEP_SRCS))
$(FUZZ_SWEEP_OBJS): CPPFLAGS += -Itests -I$(BUILD)/tests/kernels
$(FUZZ_DIR)/tests/support/kernel-load.o: $(BUILD)/tests/kernels/curd-kernels.h

# fuzz-transfer-validate, fuzz-launch, fuzz-session and fuzz-api-faults run
# public calls on the stand-in libcuda (tests/fake/fake-cuda.c), built here
# beside them and found through CURD_LIBCUDA; the test build is not
# involved.
FUZZ_FAKE_CUDA := $(FUZZ_DIR)/libcuda-fake.so.1
$(FUZZ_FAKE_CUDA): tests/fake/fake-cuda.c tests/fake/fake-kernels.c tests/fake/fake.h lib/driver/cuda_abi.h \
                   lib/transfer/gather.h | fuzz-toolchain
	@mkdir -p $(dir $@)
	@echo "  FUZZCC  $@"
	$(Q)$(FUZZ_CC) $(CPPFLAGS) -g -O1 -std=gnu11 -fPIC -shared $(WARNINGS) $(filter %.c,$^) -o $@ -lpthread -lm
$(FUZZ_DIR)/fuzz-transfer-validate $(FUZZ_DIR)/fuzz-launch $(FUZZ_DIR)/fuzz-session $(FUZZ_DIR)/fuzz-api-faults: $(FUZZ_FAKE_CUDA)
# fuzz-api-faults reaches communicators too: the stand-in NCCL beside it,
# found through CURD_LIBNCCL.
FUZZ_FAKE_NCCL := $(FUZZ_DIR)/libnccl-fake.so.2
$(FUZZ_FAKE_NCCL): tests/fake/fake-nccl.c tests/support/float16.h lib/driver/nccl_abi.h \
                   lib/driver/cuda_abi.h | fuzz-toolchain
	@mkdir -p $(dir $@)
	@echo "  FUZZCC  $@"
	$(Q)$(FUZZ_CC) $(CPPFLAGS) -Itests -g -O1 -std=gnu11 -fPIC -fwrapv -shared $(WARNINGS) $(filter %.c,$^) -o $@ -lpthread
$(FUZZ_DIR)/fuzz-api-faults: $(FUZZ_FAKE_NCCL)

FUZZ_NAMES := $(patsubst fuzz/fuzz-%.c,%,$(sort $(wildcard fuzz/fuzz-*.c)))
FUZZ_BINS := $(addprefix $(FUZZ_DIR)/fuzz-,$(FUZZ_NAMES))

fuzz_srcs = $(or $(FUZZ_SRCS_$(1)),$(shell sed -n 's|^ \* fuzz-srcs: \([^*]*\).*|\1|p' fuzz/fuzz-$(1).c),$(FUZZ_SRCS_DEFAULT))
fuzz_objs = $(patsubst %.c,$(FUZZ_DIR)/%.o,fuzz/fuzz-$(1).c $(call fuzz_srcs,$(1)))

.PHONY: fuzz fuzz-smoke fuzz-build fuzz-toolchain

fuzz-build: $(FUZZ_BINS)

# One clear line instead of a compiler error when clang or its libFuzzer
# runtime is missing.
fuzz-toolchain:
	@command -v $(FUZZ_CC) >/dev/null 2>&1 || { \
	    echo "fuzz: $(FUZZ_CC) not found. Fix: apt-get install clang (libFuzzer ships with it)."; exit 1; }

$(FUZZ_DIR)/%.o: %.c | fuzz-toolchain
	@mkdir -p $(dir $@)
	@echo "  FUZZCC  $<"
	$(Q)$(FUZZ_CC) $(CPPFLAGS) -Ifuzz $(FUZZ_CFLAGS) $(DEPFLAGS) -c $< -o $@

# $(1): target name. The long run, the smoke run and the link rule.
define FUZZ_TARGET_RULES
$(FUZZ_DIR)/fuzz-$(1): $(call fuzz_objs,$(1))
	@echo "  FUZZLD  $$@"
	$(Q)$(FUZZ_CC) $(FUZZ_LDFLAGS) $$(filter %.o,$$^) -o $$@ $(LIBS)

.PHONY: fuzz-$(1) fuzz-smoke-$(1)
fuzz-$(1): $(FUZZ_DIR)/fuzz-$(1)
	@mkdir -p $(FUZZ_DIR)/corpus/$(1) $(FUZZ_DIR)/artifacts
	@echo "  FUZZ    $(1) ($(FUZZ_SECONDS) s)"
	$(Q)$(FUZZ_DIR)/fuzz-$(1) -max_total_time=$(FUZZ_SECONDS) $(FUZZ_RUN_FLAGS) \
	    -artifact_prefix=$(FUZZ_DIR)/artifacts/$(1)- \
	    $(FUZZ_DIR)/corpus/$(1) $(wildcard fuzz/corpus/$(1))

# The smoke run keeps libFuzzer's chatter in a log and shows it only when
# the target fails.
fuzz-smoke-$(1): $(FUZZ_DIR)/fuzz-$(1)
	@mkdir -p $(FUZZ_DIR)/corpus/$(1) $(FUZZ_DIR)/artifacts $(FUZZ_DIR)/logs
	@echo "  FUZZ    $(1) ($(FUZZ_SMOKE_SECONDS) s)"
	$(Q)if $(FUZZ_DIR)/fuzz-$(1) -max_total_time=$(FUZZ_SMOKE_SECONDS) $(FUZZ_RUN_FLAGS) \
	    -artifact_prefix=$(FUZZ_DIR)/artifacts/$(1)- \
	    $(FUZZ_DIR)/corpus/$(1) $(wildcard fuzz/corpus/$(1)) \
	    >$(FUZZ_DIR)/logs/$(1).log 2>&1; then \
	    grep -h '^stat::number_of_executed_units' $(FUZZ_DIR)/logs/$(1).log \
	        | sed 's/^stat::number_of_executed_units: */          runs: /'; \
	else \
	    tail -n 40 $(FUZZ_DIR)/logs/$(1).log; \
	    echo "fuzz: $(1) failed; log in $(FUZZ_DIR)/logs/$(1).log"; exit 1; \
	fi
endef
$(foreach name,$(FUZZ_NAMES),$(eval $(call FUZZ_TARGET_RULES,$(name))))

fuzz: $(addprefix fuzz-,$(FUZZ_NAMES))

fuzz-smoke: $(addprefix fuzz-smoke-,$(FUZZ_NAMES))
