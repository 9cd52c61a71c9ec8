# The example programs (included by the Makefile). examples/*.c ship in
# libcurd-dev and are built and run against the installed packages by the
# autopkgtest (debian/tests/examples); `make check` builds and runs them
# here against build/libcurd.so.1 twice: without a driver (each must exit
# 2 with the no-driver sentence) and on the stand-in driver (each must
# exit 0).
EXAMPLE_FLAGS = -Iinclude -L$(abspath $(BUILD)) -lcurd -Wl,-rpath,$(abspath $(BUILD))

.PHONY: check-examples
check-examples: $(SHARED) $(FAKE_CUDA)
	$(Q)CURD_LIBCUDA=/nonexistent/libcuda.so.1 scripts/test-examples.sh --expect 2 \
	    examples $(BUILD)/examples/no-driver $(EXAMPLE_FLAGS)
	$(Q)CURD_LIBCUDA=$(abspath $(FAKE_CUDA)) FAKE_CUDA_MEMORY=268435456 \
	    scripts/test-examples.sh --expect 0 examples $(BUILD)/examples/fake $(EXAMPLE_FLAGS)
