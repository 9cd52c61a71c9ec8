# The example programs (included by the Makefile). examples/*.c ship in
# libcurd-dev and are built and run against the installed packages by the
# autopkgtest (debian/tests/examples); `make check` builds and runs them
# here against build/libcurd.so.1 twice: without a driver (each must exit
# 3 with the no-driver sentence) and on the stand-in driver (each must
# exit 0).
EXAMPLE_FLAGS = -Iinclude -L$(abspath $(BUILD)) -lcurd -Wl,-rpath,$(abspath $(BUILD))

.PHONY: check-examples
# Two stand-in devices and the stand-in NCCL: curd-allreduce needs both.
check-examples: $(SHARED) $(FAKE_CUDA) $(FAKE_NCCL)
	$(Q)CURD_LIBCUDA=/nonexistent/libcuda.so.1 scripts/test-examples.sh --expect 3 \
	    examples $(BUILD)/examples/no-driver $(EXAMPLE_FLAGS)
	$(Q)CURD_LIBCUDA=$(abspath $(FAKE_CUDA)) FAKE_CUDA_MEMORY=268435456 \
	    FAKE_CUDA_DEVICES=2 CURD_LIBNCCL=$(abspath $(FAKE_NCCL)) \
	    scripts/test-examples.sh --expect 0 examples $(BUILD)/examples/fake $(EXAMPLE_FLAGS)

# `make check` step: every program curd ships keeps the one exit-code
# convention (scripts/check-exit-codes.sh); the examples are built for it
# into $(BUILD)/examples/bin/.
EXAMPLE_BINS := $(patsubst examples/%.c,$(BUILD)/examples/bin/%,$(sort $(wildcard examples/*.c)))
$(BUILD)/examples/bin/%: examples/%.c include/curd.h include/curd_comm.h $(SHARED)
	@mkdir -p $(dir $@)
	@echo "  CC      $@"
	$(Q)$(CC) -std=c11 $(WARNINGS) $< -o $@ $(EXAMPLE_FLAGS)

# The examples built, for tests/gpu/pack.sh to carry to a GPU machine.
.PHONY: example-programs
example-programs: $(EXAMPLE_BINS)

.PHONY: check-exit-codes
# `make info` without a driver must end with curd-info's sentence and a
# non-zero status, not with make's "Error N" line.
check-exit-codes: $(TOOLS) $(EXAMPLE_BINS)
	$(Q)scripts/check-exit-codes.sh $(TOOLS) $(EXAMPLE_BINS)
	$(Q)status=0; CURD_LIBCUDA=/nonexistent/libcuda.so.1 $(MAKE) --no-print-directory -s \
	    info SETUP=true >$(BUILD)/make-info.log 2>&1 || status=$$?; \
	    last=$$(tail -n 1 $(BUILD)/make-info.log); \
	    case "$$status:$$last" in \
	    0:*) echo "check-exit-codes: make info without a driver exited 0"; exit 1 ;; \
	    *"Error "[0-9]*) echo "check-exit-codes: make info ends with: $$last"; exit 1 ;; \
	    *"Fix: "*) echo "check-exit-codes: make info without a driver ends with the sentence, status $$status" ;; \
	    *) echo "check-exit-codes: make info without a driver ends with: $$last"; exit 1 ;; \
	    esac
