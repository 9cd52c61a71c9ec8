# Benchmarks that are not shipped (included by the Makefile).
#
#   make bench-internal   $(BUILD)/bench/curd-bench-internal: micro-benchmarks
#                         of the library's internals (the pools alone),
#                         linked with libcurd.a; never installed
#   make bench-plot       PNG charts from curd-bench's CSV (BENCH_CSV=...)

.PHONY: bench-internal bench-plot
all: bench-internal
bench-internal: $(BUILD)/bench/curd-bench-internal

# tools/curd-bench/ includes its own headers as "folder/module.h" (its
# LAYERS file orders them) and tools/json-writer.h; curd-bench's files see
# only the public header, like the other tools.
BENCH_CPPFLAGS = $(TOOL_CPPFLAGS) -Itools/curd-bench -Itools

$(BUILD)/bench/%.o: tools/curd-bench/%.c
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	$(Q)$(CC) $(BENCH_CPPFLAGS) $(CFLAGS) -std=c11 $(WARNINGS) $(DEPFLAGS) -c $< -o $@

# tools/curd-bench/internal/ may include lib/ headers too (it measures
# them); it shares curd-bench's harness and scenarios.
BENCH_INTERNAL_OBJS := $(patsubst tools/curd-bench/%.c,$(BUILD)/bench/%.o,\
                         $(sort $(wildcard tools/curd-bench/internal/*.c)))

$(BUILD)/bench/internal/%.o: tools/curd-bench/internal/%.c
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	$(Q)$(CC) $(CPPFLAGS) -Itools/curd-bench -Itools $(CFLAGS) -std=c11 $(WARNINGS) $(DEPFLAGS) -c $< -o $@

$(BUILD)/bench/curd-bench-internal: $(BENCH_INTERNAL_OBJS) $(BENCH_HARNESS_OBJS) $(STATIC)
	@echo "  LD      $@"
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) $(BENCH_INTERNAL_OBJS) $(BENCH_HARNESS_OBJS) \
	    -o $@ $(STATIC) $(LIBS) -lm

# `make check` step: both benchmarks run every scenario once, briefly, on
# the stand-in driver (tests/fake/), which proves that every path still
# checks out byte for byte and that the CSV and JSON are written, each row
# under its own scenario's label; the timings mean nothing there.
# Two stand-in devices and the stand-in NCCL, so that the peer/ and
# collective/ scenarios run (and check their bytes) there too.
BENCH_SMOKE_ENV := CURD_LIBCUDA=$(abspath $(FAKE_CUDA)) FAKE_CUDA_MEMORY=2147483648 \
    FAKE_CUDA_DEVICES=2 CURD_LIBNCCL=$(abspath $(FAKE_NCCL))
.PHONY: bench-smoke
bench-smoke: $(BUILD)/tools/curd-bench $(BUILD)/bench/curd-bench-internal $(FAKE_CUDA) $(FAKE_NCCL)
	$(Q)$(BENCH_SMOKE_ENV) $(BUILD)/tools/curd-bench --quick --samples=2 \
	    --csv=$(BUILD)/bench-smoke.csv --json=$(BUILD)/bench-smoke.json >/dev/null
	$(Q)scripts/check-bench-labels.sh $(BUILD)/bench-smoke.csv
	$(Q)$(BENCH_SMOKE_ENV) $(BUILD)/tools/curd-bench --quick --samples=2 \
	    --scenario=tune >/dev/null
	$(Q)$(BENCH_SMOKE_ENV) $(BUILD)/bench/curd-bench-internal --quick --samples=2 >/dev/null
	@echo "curd-bench (tune/ included) and curd-bench-internal ran every scenario on the stand-in driver"

# PNG charts of curd-bench's CSV (curd-bench --csv=FILE), plus any peers'
# rows (bench/peers/measure.py) given in BENCH_CSV too, each file's series
# and bars labelled by its name; gnuplot comes from
# `scripts/setup-deps.sh plot`. The default input is a hand-made sample
# that only shows what the charts look like, and every chart says so.
BENCH_CSV ?= bench/sample-hand-made.csv
bench-plot:
	$(Q)$(SETUP) plot
	$(Q)$(if $(filter bench/sample-hand-made.csv,$(BENCH_CSV)),echo "bench-plot: no BENCH_CSV given, so these charts show the hand-made sample, not a measurement")
	$(Q)scripts/bench-plot.sh $(BUILD)/bench-plot $(BENCH_CSV)

# `make check` step: the charts of the bench-smoke CSV and of the sample
# carry their legends, units, device, driver and date
# (scripts/check-bench-plot.sh; a skip when gnuplot is missing).
.PHONY: check-bench-plot
check-bench-plot:
	$(Q)[ -f $(BUILD)/bench-smoke.csv ] || $(MAKE) --no-print-directory bench-smoke
	$(Q)scripts/check-bench-plot.sh $(BUILD)/bench-plot-check $(BUILD)/bench-smoke.csv
