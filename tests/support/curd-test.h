/* curd-test.h - helpers shared by the test programs.
 *
 * Random data comes from g_test_rand_*(), so GLib's printed seed
 * ("# random seed: ...", replay with --seed) replays a failure. */
#ifndef CURD_TESTS_SUPPORT_CURD_TEST_H
#define CURD_TESTS_SUPPORT_CURD_TEST_H

#include <glib.h>
#include <stddef.h>
#include <stdint.h>

#include "curd.h"

/* 1 in a GPU test's stand-in twin, 0 everywhere else. Each GPU test
 * (GPU_TESTS in the Makefile; tests/README.md) is built twice from its
 * one source: as itself, which skips without a GPU, and as its twin
 * test-<name>-fake, compiled with -DCURD_TEST_ON_FAKE=1, which loads the
 * stand-in driver (curd_test_require_fake_driver), allows no skip and
 * may check the stand-in's own counts. Tests ask `#if CURD_TEST_ON_FAKE`
 * or `if (CURD_TEST_ON_FAKE)`. */
#ifndef CURD_TEST_ON_FAKE
#define CURD_TEST_ON_FAKE 0
#endif

/* Fills n bytes with fresh random data. */
void curd_test_fill_random(void *p, size_t n);
/* Fills n bytes with a poison pattern that no correct output equals. */
void curd_test_poison(void *p, size_t n);

/* Asserts that curd_last_error() gives a fix ("Fix: ") and ends with a
 * full stop. */
void curd_test_assert_fix_sentence(void);

/* Opens device 0, or calls g_test_skip() with the reason (no driver, no
 * device) and returns NULL; the test then returns at once. */
curd_device *curd_test_gpu_open(void);
/* Same with options. */
curd_device *curd_test_gpu_open_with(const curd_device_options *options);

/* Whether the host has at least count GPUs. With fewer it calls
 * g_test_skip_printf("needs COUNT GPUs; this host has N") and returns
 * FALSE; the test then returns at once. tests/run-tests.sh counts a skip
 * worded so as "needs COUNT GPUs (not run)", apart from the skips, and
 * never as a failure. Call it with a device open (curd_test_gpu_open),
 * so that a missing driver or GPU is reported as such first. */
gboolean curd_test_have_gpus(int count);

/* A test that makes the GPU fault on purpose (a kernel that writes
 * through a null pointer, or any other report a compute-sanitizer tool
 * would rightly make) carries CURD_TEST_DELIBERATE_FAULT as a component
 * of its path, e.g. "/program/kernels" CURD_TEST_DELIBERATE_FAULT
 * "/a-faulting-kernel-spoils-the-context-until-reopened". That path is the
 * one place that names it: tests/gpu/run-remote.sh lists each program's
 * tests (-l) and leaves out of its sanitizer runs every test whose path
 * holds the component. */
#define CURD_TEST_DELIBERATE_FAULT "/deliberate-fault"

/* curd_device_info into poisoned props; a failure ends the test with
 * the status and the sentence. */
curd_device_props curd_test_device_info(curd_device *device);

/* curd_device_stats; a failure ends the test with the status and the
 * sentence. */
curd_stats curd_test_device_stats(curd_device *device);

/* The path of file in the test program's own folder, where make tests
 * builds the stand-ins (tests/fake/); the caller frees it with g_free. */
char *curd_test_path_beside(const char *file);
/* The stand-in driver (tests/fake/) that make tests builds beside every
 * test program as libcuda-fake.so.1: its path, which the caller frees
 * with g_free. */
char *curd_test_fake_driver_path(void);
/* The stand-in driver's counts of live objects, one for each of kinds
 * ("device_memory", "stream", ...: fake_cuda_live in tests/fake/), into
 * counts. FALSE, counting nothing, where CURD_LIBCUDA names no loaded
 * library: the program has made no driver call yet. */
gboolean curd_test_fake_live(const char *const *kinds, size_t count,
                             long *counts);
/* One such count (a running one, such as "jit_compilations"), or -1
 * where the stand-in is not loaded (a GPU). */
long curd_test_fake_count(const char *kind);
/* Runs body, a test; on the stand-in it fails the test when the counts of
 * kinds differ after it from before it. before (count of them) receives
 * the counts before body runs, and *counted whether they were read, for
 * the body to compare with. */
void curd_test_run_holding_nothing(void (*body)(void),
                                   const char *const *kinds, size_t count,
                                   long *before, gboolean *counted);
/* The stand-in NCCL (tests/fake/fake-nccl.c) beside it,
 * libnccl-fake.so.2; the caller frees the path with g_free. */
char *curd_test_fake_nccl_path(void);
/* Its live communicators (fake_nccl_live); 0 when it was never loaded. */
long curd_test_fake_nccl_live(void);
/* Its communicators aborted or destroyed while their join still ran
 * (fake_nccl_abandoned_joins, FAKE_NCCL_JOIN_POLLS); 0 when never
 * loaded. */
long curd_test_fake_nccl_abandoned_joins(void);
/* Its groups posted on blocking (or non-blocking) communicators; 0 when it
 * was never loaded. */
long curd_test_fake_nccl_groups(int blocking);
/* Points curd at that stand-in driver (CURD_LIBCUDA) and NCCL
 * (CURD_LIBNCCL) and sets
 * CURD_REQUIRE_GPU, so that a missing device fails a test instead of
 * skipping it. Call before g_test_init. */
void curd_test_require_fake_driver(void);

/* Fault injection over the driver entry-point table: driver-faults.h's,
 * asserting that it was not armed already.
 *
 * curd_test_faults_begin() wraps every entry of the table with a counting
 * wrapper; from then on driver calls are numbered 1, 2, 3, ... and call
 * number fail_at (0: none) returns cu_result instead of reaching the
 * driver. With only_entry non-NULL, only calls of that entry (e.g.
 * "cuMemAlloc") are numbered and failed. curd_test_faults_end() restores
 * the real table and returns how many calls were numbered. */
void curd_test_faults_begin(unsigned fail_at, int cu_result,
                            const char *only_entry);
unsigned curd_test_faults_end(void);
/* Whether the armed failure has fired since begin. */
gboolean curd_test_faults_fired(void);
/* Pops what an injected cuCtxPopCurrent failure left pushed on this
 * thread (the library tolerates a failed pop; the context stays current),
 * through the driver table as it is now (a test's wrapped table counts
 * the pops). Between calls a test thread has no context current. */
void curd_test_pop_leftover_contexts(void);

#endif
