# curd - top-level build. `make` builds the shared and static library and
# the tools; `make check` runs the test suite (see README.md).

VERSION_MAJOR := $(shell sed -n 's/^\#define CURD_VERSION_MAJOR \([0-9]*\).*/\1/p' include/curd.h)
VERSION_MINOR := $(shell sed -n 's/^\#define CURD_VERSION_MINOR \([0-9]*\).*/\1/p' include/curd.h)
VERSION_PATCH := $(shell sed -n 's/^\#define CURD_VERSION_PATCH \([0-9]*\).*/\1/p' include/curd.h)
VERSION := $(VERSION_MAJOR).$(VERSION_MINOR).$(VERSION_PATCH)

CC ?= cc
BUILD ?= build
WARNINGS := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
            -Wconversion -Wno-sign-conversion -Werror
CFLAGS ?= -O2 -g
CPPFLAGS += -Iinclude -Ilib -D_GNU_SOURCE
LIB_CFLAGS := -std=c11 -fPIC -fvisibility=hidden -DCURD_BUILDING $(WARNINGS)
LIBS := -ldl -lpthread

ifeq ($(V),1)
Q :=
else
Q := @
endif

SONAME := libcurd.so.$(VERSION_MAJOR)
SHARED := $(BUILD)/libcurd.so.$(VERSION)
STATIC := $(BUILD)/libcurd.a

LIB_SRCS := $(sort $(wildcard lib/*.c))
LIB_OBJS := $(patsubst lib/%.c,$(BUILD)/lib/%.o,$(LIB_SRCS))

GLIB_CFLAGS = $(shell pkg-config --cflags glib-2.0)
GLIB_LIBS = $(shell pkg-config --libs glib-2.0)

TEST_SRCS := $(sort $(wildcard tests/test-*.c))
TEST_BINS := $(patsubst tests/%.c,$(BUILD)/tests/%,$(TEST_SRCS))
TEST_SUPPORT := $(wildcard tests/support/*.c)

TOOLS := $(BUILD)/tools/curd-info $(BUILD)/tools/curd-bench

.PHONY: all lib tools tests check check-gpu clean
all: lib tools

lib: $(SHARED) $(STATIC)

$(BUILD)/lib/%.o: lib/%.c $(wildcard lib/*.h) include/curd.h
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) $(LIB_CFLAGS) -c $< -o $@

$(SHARED): $(LIB_OBJS) lib/curd.map
	@echo "  LD      $@"
	$(Q)$(CC) -shared $(LDFLAGS) -Wl,-soname,$(SONAME) \
	    -Wl,--version-script=lib/curd.map -Wl,--no-undefined \
	    -o $@ $(LIB_OBJS) $(LIBS)
	$(Q)ln -sf libcurd.so.$(VERSION) $(BUILD)/$(SONAME)
	$(Q)ln -sf $(SONAME) $(BUILD)/libcurd.so

$(STATIC): $(LIB_OBJS)
	@echo "  AR      $@"
	$(Q)rm -f $@ && $(AR) rcs $@ $(LIB_OBJS)

tools: $(TOOLS)

# curd-info links the shared library like any consumer; curd-bench links the
# static one because it times the raw driver through the library's own
# entry-point table.
$(BUILD)/tools/curd-info: tools/curd-info.c $(SHARED)
	@mkdir -p $(dir $@)
	@echo "  CC      $@"
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) -std=c11 $(WARNINGS) $< -o $@ \
	    -L$(BUILD) -lcurd -Wl,-rpath,'$$ORIGIN/..' $(LDFLAGS)

$(BUILD)/tools/curd-bench: tools/curd-bench.c $(wildcard tools/bench-*.c) $(STATIC)
	@mkdir -p $(dir $@)
	@echo "  CC      $@"
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) -std=c11 $(WARNINGS) $(filter %.c,$^) -o $@ \
	    $(STATIC) $(LIBS) -lm $(LDFLAGS)

tests: $(TEST_BINS)

$(BUILD)/tests/%: tests/%.c $(TEST_SUPPORT) $(wildcard tests/support/*.h) $(STATIC)
	@mkdir -p $(dir $@)
	@echo "  CC      $@"
	$(Q)$(CC) $(CPPFLAGS) -Itests $(GLIB_CFLAGS) $(CFLAGS) -std=gnu11 $(WARNINGS) \
	    $(TEST_EXTRA_CFLAGS) $< $(TEST_SUPPORT) -o $@ $(STATIC) $(GLIB_LIBS) $(LIBS) -lm

check: tests
	$(Q)tests/run-tests.sh $(TEST_BINS)

check-gpu: tests
	$(Q)CURD_REQUIRE_GPU=1 tests/run-tests.sh --skip-is-failure $(TEST_BINS)

clean:
	rm -rf $(BUILD)
