/* fuzz-launch.c - launch descriptors and parameter lists against an
 * independent reference, on the stand-in driver.
 *
 * curd_dispatch (or curd_dispatch_async and a wait) runs for real against
 * tests/fake/fake-cuda.c, built as $(BUILD)/fuzz/libcuda-fake.so.1 beside
 * this harness and loaded through CURD_LIBCUDA; the stand-in keeps device
 * memory on the host and runs the harness kernels there, so the harness
 * reads resident buffers straight through their device pointers.
 *
 * Input: the kernel (add_one: a pointer and a u32 count; scalars: nine
 * parameters of sizes 1, 8, 2, 4, 16, 8, 12, 8, 1, two of them pointers
 * it writes), a few resident buffers (one possibly freed at once), the
 * curd_launch (struct_size, explicit or derived grid, block, dynamic
 * shared memory, flags, iterations) and the arguments, each starting from
 * the kernel's own parameter and mutated: kind, role, host address and
 * length (in a host arena, NULL, or near the top of the address space),
 * buffer handle (live, freed, of another device, zero, forged), scalar
 * size, alignment and bytes, element size, static length, length_arg,
 * reserved, the read-back range.
 *
 * The reference, written from include/curd.h's rules in the library's
 * order of checks: the launch (struct, flags, iterations 0, each block
 * and grid axis within the device's limits, threads within the kernel's,
 * a derived grid, dynamic shared memory within the kernel's, a
 * cooperative grid within the blocks that fit at once: the stand-in's
 * occupancy times its multiprocessors); then each argument in order
 * (reserved, kind, scalar value, size and alignment, role, host NULL for
 * a length, a host range past the address space, an empty borrowed
 * range, length_arg naming an unsigned integer scalar); the parameter
 * list (count, then each size); borrowed bytes past the device's memory;
 * each handle live; then each binding in order (its length in elements
 * times element size past 2^64, or past the binding; the read-back range
 * inside the binding and the destination). All sums in 128 bits. The
 * status must match, and a sentence about one argument must name it.
 *
 * On a refusal no byte of the arena or of any buffer changed and nothing
 * was counted. On success a byte model of the dispatch (inputs staged at
 * the call, outputs and scratch zeroed, the kernel run `iterations` times
 * on the bound memory, read-backs copied out in argument order) must match
 * every byte of the arena and of every buffer, and dispatches and
 * launches grew by 1 and by the iterations. The stand-in emulates 1-D
 * launches only: a valid launch of another shape must fail at the launch
 * (CURD_E_DRIVER) with caller memory untouched. A launch whose kernel
 * would reach past the memory bound to it, which curd cannot know, is not
 * run (the input is dropped).
 *
 * Built from the whole library (FUZZ_SRCS_launch in fuzz.mk). */
#include "fuzz-stand-in.h"

#define MAX_ARGS 12
#define MAX_BUFFERS 3
#define ARENA_SPAN 4096u
#define ARENA_LEN (ARENA_SPAN + FUZZ_MAX_BUFFER_LEN)
#define VALUE_POOL 64u
#define NO_ARG SIZE_MAX
#define SHARED_DEFAULT (48u * 1024u)
/* The stand-in's device (tests/fake/fake-cuda.c). */
#define FAKE_MULTIPROCESSORS 4u

enum kernel_kind { KERNEL_ADD_ONE, KERNEL_SCALARS, KERNEL_KINDS };

/* A parameter of a kernel: its size, and whether it is a pointer. */
typedef struct param {
    uint32_t size;
    bool pointer;
    uint32_t align; /* for a by-value struct, its alignment; else 0 */
} param;

typedef struct kernel {
    const char *entry;
    uint32_t count;
    param params[9];
    curd_program *program;
    curd_program_props props;
} kernel;

static kernel kernels[KERNEL_KINDS] = {
    {"curd_add_one", 2, {{8, true, 0}, {4, false, 0}}, NULL, {0}},
    {"curd_scalars",
     9,
     {{1, false, 0},
      {8, true, 0},
      {2, false, 0},
      {4, false, 0},
      {16, false, 8},
      {8, false, 0},
      {12, false, 4},
      {8, true, 0},
      {1, false, 0}},
     NULL,
     {0}},
};

/* add_one.ptx and scalars.ptx as the library sees them: only their
 * parameter lists matter to the stand-in. */
static const char add_one_ptx[] =
    ".version 8.0\n.target sm_75\n.address_size 64\n"
    ".visible .entry curd_add_one(\n"
    "    .param .u64 curd_add_one_param_0,\n"
    "    .param .u32 curd_add_one_param_1\n"
    ")\n{\n    ret;\n}\n";
static const char scalars_ptx[] =
    ".version 8.0\n.target sm_75\n.address_size 64\n"
    ".visible .entry curd_scalars(\n"
    "    .param .u8 curd_scalars_param_0,\n"
    "    .param .u64 curd_scalars_param_1,\n"
    "    .param .u16 curd_scalars_param_2,\n"
    "    .param .u32 curd_scalars_param_3,\n"
    "    .param .align 8 .b8 curd_scalars_param_4[16],\n"
    "    .param .u64 curd_scalars_param_5,\n"
    "    .param .align 4 .b8 curd_scalars_param_6[12],\n"
    "    .param .u64 curd_scalars_param_7,\n"
    "    .param .u8 curd_scalars_param_8\n"
    ")\n{\n    ret;\n}\n";

typedef struct verdict {
    curd_status status;
    size_t arg; /* the argument the sentence names, or NO_ARG */
} verdict;

/* The launch as the reference resolved it. */
typedef struct shape {
    uint64_t grid[3];
    uint64_t block[3];
} shape;

static curd_device_props props;
static bool trace; /* FUZZ_LAUNCH_TRACE=1: one line per call on stderr */

static unsigned char arena[ARENA_LEN];
static unsigned char arena_before[ARENA_LEN];
static unsigned char values[VALUE_POOL];

static curd_program *load_program(const char *ptx, const char *entry)
{
    curd_program_desc desc;
    curd_program_desc_init(&desc);
    desc.image = ptx;
    desc.image_bytes = strlen(ptx);
    desc.entry = entry;
    curd_program *program = NULL;
    if (curd_program_load(device, &desc, &program) != CURD_OK) {
        fprintf(stderr, "fuzz-launch: loading %s: %s\n", entry,
                curd_last_error());
        abort();
    }
    return program;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    trace = getenv("FUZZ_LAUNCH_TRACE") != NULL;
    fuzz_stand_in_open("fuzz-launch");
    props.struct_size = sizeof props;
    FUZZ_CHECK(curd_device_info(device, &props) == CURD_OK);
    kernels[KERNEL_ADD_ONE].program = load_program(add_one_ptx,
                                                   "curd_add_one");
    kernels[KERNEL_SCALARS].program = load_program(scalars_ptx,
                                                   "curd_scalars");
    for (unsigned k = 0; k < KERNEL_KINDS; k++) {
        kernels[k].props.struct_size = sizeof kernels[k].props;
        FUZZ_CHECK(curd_program_info(kernels[k].program, &kernels[k].props)
                   == CURD_OK);
        FUZZ_CHECK(kernels[k].props.param_count_known == 1
                   && kernels[k].props.param_count == kernels[k].count);
    }
    return 0;
}

/* ------------------------------------------------------------------------
 * Decoding
 * ---------------------------------------------------------------------- */

/* A grid or block axis: mostly small, sometimes at or past a limit. */
static uint32_t decode_axis(fuzz_input *in, int limit, bool block)
{
    uint8_t shape = fuzz_u8(in);
    switch (shape & 7u) {
    case 0:
        return 0;
    case 1:
        return (uint32_t)limit;
    case 2:
        return (uint32_t)limit + 1u;
    case 3:
        return (uint32_t)fuzz_u64(in);
    default:
        return block ? 1u + (uint32_t)(shape >> 3) * 37u % 1024u
                     : 1u + (uint32_t)(shape >> 3);
    }
}

static void decode_launch(fuzz_input *in, curd_launch *launch, bool *explicit)
{
    curd_launch_init(launch);
    uint8_t mode = fuzz_u8(in);
    *explicit = (mode & 1u) != 0;
    launch->block[0] = decode_axis(in, props.max_block_dim[0], true);
    if (mode & 2u) {
        launch->block[1] = decode_axis(in, props.max_block_dim[1], true);
        launch->block[2] = decode_axis(in, props.max_block_dim[2], true);
    }
    if (*explicit) {
        launch->grid[0] = decode_axis(in, props.max_grid_dim[0], false);
        launch->grid[1] = (mode & 4u)
                              ? decode_axis(in, props.max_grid_dim[1], false)
                              : 1u;
        launch->grid[2] = (mode & 4u)
                              ? decode_axis(in, props.max_grid_dim[2], false)
                              : 1u;
    } else {
        uint8_t shape = fuzz_u8(in);
        launch->elements = (shape & 3u) == 0   ? 0
                           : (shape & 3u) == 1 ? fuzz_shaped_u64(in)
                                               : (uint64_t)(shape >> 2) * 13u;
    }
    uint8_t shared = fuzz_u8(in);
    switch (shared & 7u) {
    case 0:
    case 1:
    case 2:
        launch->dynamic_shared_bytes = 0;
        break;
    case 3:
        launch->dynamic_shared_bytes = (uint32_t)(shared >> 3) * 1024u;
        break;
    case 4:
        launch->dynamic_shared_bytes = SHARED_DEFAULT + (shared >> 3) * 4096u;
        break;
    default:
        launch->dynamic_shared_bytes = (uint32_t)fuzz_u64(in);
        break;
    }
    uint8_t flags = fuzz_u8(in);
    launch->flags = (flags & 3u) == 3u   ? CURD_LAUNCH_COOPERATIVE
                    : (flags & 7u) == 6u ? 1u << (flags >> 3)
                                         : 0u;
    launch->iterations = (mode >> 4) & 3u;
    if ((mode & 0xc0u) != 0)
        launch->iterations = launch->iterations == 0 ? 1u
                                                     : launch->iterations;
}

/* A host range of len bytes: in the arena, NULL, or near the top of the
 * address space (always past it by the range's end, so a library that
 * accepted it would be wrong before it could touch a byte). */
static void *decode_host(fuzz_input *in, size_t *len)
{
    uint8_t place = fuzz_u8(in);
    switch (place & 7u) {
    case 0:
        return NULL;
    case 1: {
        uintptr_t room = (uintptr_t)(place >> 3);
        if (*len <= room)
            *len = room + 1u;
        return (void *)(UINTPTR_MAX - room);
    }
    default: {
        size_t at = (size_t)fuzz_u64(in) % ARENA_SPAN;
        /* Within the arena; larger only past the device's memory, which
         * is refused before the range is read. */
        if (*len > ARENA_LEN - at && *len <= props.total_memory_bytes)
            *len = ARENA_LEN - at;
        return arena + at;
    }
    }
}

static size_t decode_len(fuzz_input *in, size_t usual)
{
    uint8_t shape = fuzz_u8(in);
    switch (shape & 7u) {
    case 0:
        return 0;
    case 1:
        return (size_t)props.total_memory_bytes + 1u + (shape >> 3);
    case 2:
        return SIZE_MAX - (shape >> 3);
    case 3:
        return 1u + (size_t)fuzz_u64(in) % FUZZ_MAX_BUFFER_LEN;
    default:
        return usual + (size_t)(shape >> 6);
    }
}

/* A scalar's bytes: small counts mostly, so kernels that take a count
 * stay within their memory. */
static void decode_scalar_bytes(fuzz_input *in, unsigned char *bytes,
                                size_t len)
{
    uint8_t shape = fuzz_u8(in);
    uint64_t value = (shape & 3u) != 0 ? (uint64_t)(shape >> 2) * 5u
                                       : fuzz_u64(in);
    for (size_t i = 0; i < len; i++)
        bytes[i] = i < 8 ? (uint8_t)(value >> (8 * i)) : fuzz_u8(in);
}

static void decode_arg(fuzz_input *in, const param *slot, size_t nargs,
                       uint64_t freed_now, size_t *value_used, curd_arg *arg)
{
    uint8_t mutate = fuzz_u8(in);
    uint8_t kind_pick = fuzz_u8(in);
    memset(arg, 0, sizeof *arg);
    arg->length_arg = -1;
    if (slot == NULL || (mutate & 1u) != 0)
        arg->kind = kind_pick % 5u; /* 4: not a kind */
    else if (slot->pointer)
        arg->kind = (kind_pick & 7u) == 0   ? CURD_ARG_NULL
                    : (kind_pick & 1u) != 0 ? CURD_ARG_BUFFER
                                            : CURD_ARG_HOST;
    else
        arg->kind = CURD_ARG_SCALAR;
    if ((mutate & 0xf0u) == 0xf0u)
        arg->reserved = 1u + (mutate & 7u);
    if (arg->kind == CURD_ARG_SCALAR) {
        static const size_t sizes[] = {1, 2, 4, 8, 12, 16, 3, 0, 4097, 4096};
        static const uint32_t aligns[] = {1, 2, 4, 8, 16, 3, 512, 0};
        uint8_t shape = fuzz_u8(in);
        arg->byte_len = slot != NULL && !slot->pointer && (shape & 3u) != 0
                            ? slot->size
                            : sizes[(shape >> 2) % 10u];
        arg->align = (mutate & 2u) != 0 ? aligns[(shape >> 4) % 8u]
                     : slot != NULL     ? slot->align
                                        : 0u;
        size_t len = arg->byte_len <= 16 ? arg->byte_len : 16;
        if ((mutate & 4u) != 0 && (mutate & 8u) != 0) {
            arg->value = NULL;
        } else if (*value_used + len <= VALUE_POOL) {
            decode_scalar_bytes(in, values + *value_used, len);
            arg->value = values + *value_used;
            *value_used += len;
        } else {
            arg->value = values;
        }
        /* A larger scalar is refused before its bytes are read. */
        return;
    }
    if (arg->kind != CURD_ARG_HOST && arg->kind != CURD_ARG_BUFFER)
        return;
    uint8_t role = fuzz_u8(in);
    arg->role = (role & 15u) < 13u ? 1u + (role & 3u) : (role >> 4) % 8u;
    uint8_t fields = fuzz_u8(in);
    if (arg->kind == CURD_ARG_BUFFER) {
        size_t live;
        arg->buffer.id = fuzz_decode_id(in, freed_now, &live);
        if ((fields & 1u) != 0) {
            size_t len = decode_len(in, 76);
            arg->host = decode_host(in, &len);
            arg->byte_len = len;
        }
    } else {
        size_t len = decode_len(in, 76);
        arg->host = decode_host(in, &len);
        arg->byte_len = len;
    }
    static const uint32_t elem_sizes[] = {0, 1, 4, 8, 3, 0x80000000u};
    if ((fields & 2u) != 0)
        arg->elem_bytes = elem_sizes[(fields >> 4) % 6u];
    if ((fields & 4u) != 0) {
        uint8_t shape = fuzz_u8(in);
        arg->static_elems = (shape & 1u) != 0 ? (uint64_t)(shape >> 1) * 3u
                                              : fuzz_shaped_u64(in);
    }
    if ((fields & 8u) != 0) {
        uint8_t pick = fuzz_u8(in);
        switch (pick & 3u) {
        case 0:
            arg->length_arg = 1; /* add_one's count, scalars' first */
            break;
        case 1:
            arg->length_arg = (int32_t)((size_t)(pick >> 2) % (nargs + 2u));
            break;
        case 2:
            arg->length_arg = -2 - (int32_t)(pick >> 2);
            break;
        default:
            arg->length_arg = INT32_MAX;
            break;
        }
    }
    if ((fields & 0x80u) != 0) {
        uint8_t shape = fuzz_u8(in);
        arg->read_offset = (shape & 1u) != 0 ? (uint64_t)(shape >> 1) * 4u
                                             : fuzz_shaped_u64(in);
        shape = fuzz_u8(in);
        arg->read_len = (shape & 1u) != 0 ? (uint64_t)(shape >> 1) * 4u
                                          : fuzz_shaped_u64(in);
    }
}

/* ------------------------------------------------------------------------
 * The reference
 * ---------------------------------------------------------------------- */

static bool is_binding(const curd_arg *arg)
{
    return arg->kind == CURD_ARG_HOST || arg->kind == CURD_ARG_BUFFER;
}

static bool reads_input(const curd_arg *arg)
{
    return arg->role == CURD_ROLE_INPUT || arg->role == CURD_ROLE_INOUT;
}

static bool writes_output(const curd_arg *arg)
{
    return arg->role == CURD_ROLE_OUTPUT || arg->role == CURD_ROLE_INOUT;
}

/* An unsigned integer scalar's value, little-endian. */
static bool count_of(const curd_arg *arg, uint64_t *out)
{
    if (arg->kind != CURD_ARG_SCALAR || arg->value == NULL
        || (arg->byte_len != 1 && arg->byte_len != 2 && arg->byte_len != 4
            && arg->byte_len != 8))
        return false;
    uint64_t value = 0;
    for (size_t i = 0; i < arg->byte_len; i++)
        value |= (uint64_t)((const unsigned char *)arg->value)[i] << (8 * i);
    *out = value;
    return true;
}

static bool axes_fit(const uint32_t dims[3], const int limits[3],
                     uint64_t *product)
{
    *product = 1;
    for (int axis = 0; axis < 3; axis++) {
        if (dims[axis] == 0 || dims[axis] > (uint32_t)limits[axis])
            return false;
        *product *= dims[axis];
    }
    return true;
}

/* The stand-in's blocks per multiprocessor (fake-cuda.c's occupancy). */
static uint64_t fake_occupancy(const kernel *k, uint64_t threads,
                               uint64_t dynamic_shared)
{
    uint64_t shared = k->props.static_shared_bytes + dynamic_shared + 1024u;
    uint64_t by_threads = 2048u / threads;
    uint64_t by_shared = (uint64_t)228u * 1024u / shared;
    uint64_t blocks = by_threads < 32u ? by_threads : 32u;
    return blocks < by_shared ? blocks : by_shared;
}

static verdict refuse(curd_status status, size_t arg)
{
    verdict v = {status, arg};
    return v;
}

static verdict check_launch(const kernel *k, const curd_launch *launch,
                            size_t struct_size, bool tail_zero, shape *run)
{
    /* curd 1.0's struct ends before cu_stream: the oldest accepted. */
    if (launch == NULL || struct_size < offsetof(curd_launch, cu_stream)
        || (struct_size > sizeof *launch
            && (struct_size - sizeof *launch > 4096u || !tail_zero)))
        return refuse(CURD_E_INVALID_ARGUMENT, NO_ARG);
    if ((launch->flags & ~CURD_LAUNCH_COOPERATIVE) != 0
        || launch->iterations == 0)
        return refuse(CURD_E_INVALID_ARGUMENT, NO_ARG);
    uint64_t threads, blocks;
    if (!axes_fit(launch->block, props.max_block_dim, &threads))
        return refuse(CURD_E_RANGE, NO_ARG);
    uint64_t thread_limit = (uint64_t)props.max_threads_per_block;
    if (k->props.max_threads_per_block > 0
        && (uint64_t)k->props.max_threads_per_block < thread_limit)
        thread_limit = (uint64_t)k->props.max_threads_per_block;
    if (threads > thread_limit)
        return refuse(CURD_E_RANGE, NO_ARG);
    uint32_t grid[3] = {launch->grid[0], launch->grid[1], launch->grid[2]};
    if (grid[0] == 0 && grid[1] == 0 && grid[2] == 0) {
        if (launch->elements == 0)
            return refuse(CURD_E_INVALID_ARGUMENT, NO_ARG);
        fuzz_u128 derived = ((fuzz_u128)launch->elements + launch->block[0]
                             - 1u) / launch->block[0];
        if (derived > (fuzz_u128)(uint32_t)props.max_grid_dim[0])
            return refuse(CURD_E_RANGE, NO_ARG);
        grid[0] = (uint32_t)derived;
        grid[1] = grid[2] = 1;
    }
    if (!axes_fit(grid, props.max_grid_dim, &blocks))
        return refuse(CURD_E_RANGE, NO_ARG);
    if (launch->dynamic_shared_bytes > k->props.max_dynamic_shared_bytes)
        return refuse(CURD_E_RANGE, NO_ARG);
    if ((launch->flags & CURD_LAUNCH_COOPERATIVE) != 0) {
        if ((props.capabilities & CURD_CAP_COOPERATIVE_LAUNCH) == 0)
            return refuse(CURD_E_UNSUPPORTED, NO_ARG);
        if (blocks > fake_occupancy(k, threads, launch->dynamic_shared_bytes)
                         * FAKE_MULTIPROCESSORS)
            return refuse(CURD_E_RANGE, NO_ARG);
    }
    for (int axis = 0; axis < 3; axis++) {
        run->grid[axis] = grid[axis];
        run->block[axis] = launch->block[axis];
    }
    return refuse(CURD_OK, NO_ARG);
}

static verdict check_arg(const curd_arg *args, size_t nargs, size_t i)
{
    const curd_arg *arg = &args[i];
    if (arg->reserved != 0)
        return refuse(CURD_E_INVALID_ARGUMENT, i);
    if (arg->kind == CURD_ARG_NULL)
        return refuse(CURD_OK, NO_ARG);
    if (arg->kind == CURD_ARG_SCALAR) {
        size_t natural = arg->byte_len >= 8 ? 8 : arg->byte_len;
        size_t align = arg->align != 0 ? arg->align : natural;
        if (arg->value == NULL || arg->byte_len == 0)
            return refuse(CURD_E_INVALID_ARGUMENT, i);
        bool power_of_two = align != 0 && (align & (align - 1)) == 0;
        if (arg->byte_len > 4096 || !power_of_two || align > 256
            || arg->byte_len % align != 0)
            return refuse(CURD_E_INVALID_ARGUMENT, i);
        return refuse(CURD_OK, NO_ARG);
    }
    if (!is_binding(arg))
        return refuse(CURD_E_INVALID_ARGUMENT, i);
    if (arg->role < CURD_ROLE_INPUT || arg->role > CURD_ROLE_SCRATCH)
        return refuse(CURD_E_INVALID_ARGUMENT, i);
    if (arg->byte_len != 0 && arg->host == NULL
        && !(arg->kind == CURD_ARG_HOST && arg->role == CURD_ROLE_SCRATCH))
        return refuse(CURD_E_INVALID_ARGUMENT, i);
    if ((fuzz_u128)(uintptr_t)arg->host + arg->byte_len
        > (fuzz_u128)UINTPTR_MAX)
        return refuse(CURD_E_OVERFLOW, i);
    if (arg->kind == CURD_ARG_HOST && arg->byte_len == 0)
        return refuse(CURD_E_INVALID_ARGUMENT, i);
    uint64_t count;
    if (arg->length_arg >= 0
        && ((size_t)arg->length_arg >= nargs
            || !count_of(&args[arg->length_arg], &count)))
        return refuse(CURD_E_INVALID_ARGUMENT, i);
    if (arg->length_arg < -1)
        return refuse(CURD_E_INVALID_ARGUMENT, i);
    return refuse(CURD_OK, NO_ARG);
}

/* The bytes behind a binding: the borrowed range, or the buffer. */
static uint64_t binding_bytes(const curd_arg *arg)
{
    return arg->kind == CURD_ARG_HOST ? arg->byte_len
                                      : live_lens[fuzz_live_index(arg->buffer.id)];
}

/* A binding's read-back: [offset, offset + len) of its bytes into host. */
static verdict read_back(const curd_arg *arg, size_t i, uint64_t *offset,
                         uint64_t *len)
{
    *offset = 0;
    *len = 0;
    if (!writes_output(arg) || arg->host == NULL)
        return refuse(CURD_OK, NO_ARG);
    uint64_t bytes = binding_bytes(arg);
    uint64_t want = arg->read_len;
    if (want == 0 && arg->read_offset <= bytes)
        want = bytes - arg->read_offset;
    fuzz_u128 end = (fuzz_u128)arg->read_offset + want;
    if (end > (fuzz_u128)UINT64_MAX)
        return refuse(CURD_E_OVERFLOW, i);
    if (end > bytes || want > arg->byte_len)
        return refuse(CURD_E_RANGE, i);
    *offset = arg->read_offset;
    *len = want;
    return refuse(CURD_OK, NO_ARG);
}

static verdict reference(const kernel *k, const curd_launch *launch,
                         size_t struct_size, bool tail_zero,
                         const curd_arg *args, size_t nargs, bool args_null,
                         shape *run)
{
    verdict v = check_launch(k, launch, struct_size, tail_zero, run);
    if (v.status != CURD_OK)
        return v;
    if (args_null && nargs != 0)
        return refuse(CURD_E_INVALID_ARGUMENT, NO_ARG);
    fuzz_u128 borrowed = 0;
    for (size_t i = 0; i < nargs; i++) {
        v = check_arg(args, nargs, i);
        if (v.status != CURD_OK)
            return v;
        if (args[i].kind == CURD_ARG_HOST)
            borrowed += args[i].byte_len;
    }
    if (nargs != k->count)
        return refuse(CURD_E_INVALID_ARGUMENT, NO_ARG);
    for (size_t i = 0; i < nargs; i++) {
        size_t given = args[i].kind == CURD_ARG_SCALAR ? args[i].byte_len : 8;
        if (given != k->params[i].size)
            return refuse(CURD_E_INVALID_ARGUMENT, i);
    }
    if (borrowed > props.total_memory_bytes)
        return refuse(CURD_E_BUDGET, NO_ARG);
    for (size_t i = 0; i < nargs; i++)
        if (args[i].kind == CURD_ARG_BUFFER
            && fuzz_live_index(args[i].buffer.id) == SIZE_MAX)
            return refuse(CURD_E_STALE_HANDLE, NO_ARG);
    for (size_t i = 0; i < nargs; i++) {
        const curd_arg *arg = &args[i];
        if (!is_binding(arg))
            continue;
        uint64_t elems = arg->static_elems;
        uint64_t elem_bytes = arg->elem_bytes != 0 ? arg->elem_bytes : 1;
        if (arg->length_arg >= 0)
            (void)count_of(&args[arg->length_arg], &elems);
        fuzz_u128 needed = (fuzz_u128)elems * elem_bytes;
        if (needed > (fuzz_u128)UINT64_MAX)
            return refuse(CURD_E_OVERFLOW, i);
        if (needed > binding_bytes(arg))
            return refuse(CURD_E_RANGE, i);
        uint64_t offset, len;
        v = read_back(arg, i, &offset, &len);
        if (v.status != CURD_OK)
            return v;
    }
    return refuse(CURD_OK, NO_ARG);
}

/* ------------------------------------------------------------------------
 * The byte model of an accepted dispatch
 * ---------------------------------------------------------------------- */

/* Bound memory: a borrowed range's device block, or a resident buffer's
 * model. known[i] is false for bytes no one can predict (a device block's
 * address the kernel writes). */
typedef struct region {
    unsigned char *bytes;
    bool *known;
    size_t len;
    uint64_t address; /* the device address, 0 when unknown */
} region;

static unsigned char borrowed_bytes[MAX_ARGS][ARENA_LEN];
static bool borrowed_known[MAX_ARGS][ARENA_LEN];
static bool buffer_known[MAX_BUFFERS][FUZZ_MAX_BUFFER_LEN];
static bool arena_known[ARENA_LEN];

static region region_of(const curd_arg *args, size_t i)
{
    region r = {NULL, NULL, 0, 0};
    if (args[i].kind == CURD_ARG_HOST) {
        r.bytes = borrowed_bytes[i];
        r.known = borrowed_known[i];
        r.len = args[i].byte_len;
    } else if (args[i].kind == CURD_ARG_BUFFER) {
        size_t b = fuzz_live_index(args[i].buffer.id);
        r.bytes = model[b];
        r.known = buffer_known[b];
        r.len = live_lens[b];
        r.address = live_ptrs[b];
    }
    return r;
}

/* The words add_one touches per launch: its count, one per thread. */
static uint64_t add_one_words(const curd_arg *args, const shape *run)
{
    uint64_t threads = run->grid[0] * run->block[0];
    uint64_t n = 0;
    memcpy(&n, args[1].value, 4);
    return n < threads ? n : threads;
}

/* Whether every access the kernel makes through its pointer parameters
 * stays inside the memory bound to them. */
static bool kernel_is_safe(enum kernel_kind kind, const curd_arg *args,
                           const shape *run)
{
    if (kind == KERNEL_ADD_ONE) {
        uint64_t n = add_one_words(args, run);
        return n == 0 || (is_binding(&args[0])
                          && n * 4u <= binding_bytes(&args[0]));
    }
    return is_binding(&args[1]) && binding_bytes(&args[1]) >= 72
           && is_binding(&args[7]) && binding_bytes(&args[7]) >= 12;
}

static void write_bytes(region r, size_t at, const void *src, size_t len,
                        bool known)
{
    memcpy(r.bytes + at, src, len);
    for (size_t i = 0; i < len; i++)
        r.known[at + i] = known;
}

/* One launch of the kernel on the model (1-D, safe). */
static void run_kernel(enum kernel_kind kind, const curd_arg *args,
                       const shape *run)
{
    if (kind == KERNEL_ADD_ONE) {
        uint64_t n = add_one_words(args, run);
        region data = region_of(args, 0);
        for (uint64_t i = 0; i < n; i++) {
            uint32_t word;
            memcpy(&word, data.bytes + 4 * i, 4);
            word += 1u;
            write_bytes(data, 4 * i, &word, 4, data.known[4 * i]);
        }
        return;
    }
    region out = region_of(args, 1), out2 = region_of(args, 7);
    static const unsigned char zeros[48];
    unsigned char pattern[16];
    memset(pattern, 0xA5, sizeof pattern);
    write_bytes(out, 0, zeros, 48, true);
    write_bytes(out, 0, args[0].value, 1, true);
    write_bytes(out, 2, args[2].value, 2, true);
    write_bytes(out, 4, args[3].value, 4, true);
    if (args[5].kind == CURD_ARG_SCALAR) {
        write_bytes(out, 8, args[5].value, 8, true);
    } else {
        region pointed = region_of(args, 5);
        bool known = args[5].kind != CURD_ARG_HOST;
        write_bytes(out, 8, &pointed.address, 8, known);
    }
    write_bytes(out, 16, args[4].value, 16, true);
    write_bytes(out, 32, args[6].value, 12, true);
    write_bytes(out, 44, args[8].value, 1, true);
    write_bytes(out, 48, &out2.address, 8, args[7].kind != CURD_ARG_HOST);
    write_bytes(out, 56, pattern, 16, true);
    write_bytes(out2, 0, args[6].value, 12, true);
}

/* The whole dispatch on the model, in the library's order. */
static void model_dispatch(enum kernel_kind kind, const curd_arg *args,
                           size_t nargs, const curd_launch *launch,
                           const shape *run)
{
    memcpy(arena_before, arena, sizeof arena);
    memset(arena_known, 1, sizeof arena_known);
    for (size_t i = 0; i < nargs; i++) {
        const curd_arg *arg = &args[i];
        if (!is_binding(arg))
            continue;
        region r = region_of(args, i);
        if (arg->kind == CURD_ARG_HOST && reads_input(arg))
            write_bytes(r, 0, arg->host, arg->byte_len, true);
        else if (!reads_input(arg))
            for (size_t at = 0; at < r.len; at++)
                write_bytes(r, at, "", 1, true);
    }
    for (uint32_t i = 0; i < launch->iterations; i++)
        run_kernel(kind, args, run);
    for (size_t i = 0; i < nargs; i++) {
        uint64_t offset, len;
        if (!is_binding(&args[i]))
            continue;
        FUZZ_CHECK(read_back(&args[i], i, &offset, &len).status == CURD_OK);
        if (len == 0)
            continue;
        region r = region_of(args, i);
        size_t at = (size_t)((unsigned char *)args[i].host - arena);
        memcpy(arena_before + at, r.bytes + offset, len);
        memcpy(arena_known + at, r.known + offset, len);
    }
}

/* ------------------------------------------------------------------------
 * One input
 * ---------------------------------------------------------------------- */

static void check_buffers(const bool *maybe_written)
{
    for (size_t b = 0; b < live_count; b++) {
        if (maybe_written != NULL && maybe_written[b])
            continue;
        for (size_t at = 0; at < live_lens[b]; at++)
            FUZZ_CHECK(!buffer_known[b][at]
                       || live_bytes[b][at] == model[b][at]);
    }
}

static void check_arena(void)
{
    for (size_t at = 0; at < ARENA_LEN; at++)
        if (arena_known[at] && arena[at] != arena_before[at]) {
            fprintf(stderr, "arena byte %zu is 0x%02x, the model 0x%02x\n",
                    at, arena[at], arena_before[at]);
            FUZZ_CHECK(false);
        }
}

static curd_status run_call(const kernel *k, const curd_launch *launch,
                            const curd_arg *args, size_t nargs, bool async)
{
    if (!async)
        return curd_dispatch(device, k->program, launch, args, nargs);
    curd_pending *pending = NULL;
    curd_status status = curd_dispatch_async(device, k->program, launch,
                                             args, nargs, &pending);
    if (status != CURD_OK)
        return status;
    curd_timing timing = {.struct_size = sizeof timing};
    status = curd_pending_wait(pending, &timing);
    FUZZ_CHECK(curd_pending_free(pending) == CURD_OK);
    return status;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_input in = {data, size};
    uint8_t header = fuzz_u8(&in);
    enum kernel_kind kind = (header & 0x80u) ? KERNEL_SCALARS : KERNEL_ADD_ONE;
    const kernel *k = &kernels[kind];
    bool async = (header & 0x40u) != 0;
    static const size_t common[8] = {4, 12, 72, 76, 256, 1024, 8, 100};
    uint64_t freed_now = fuzz_buffers_make(
        &in, 1u + (size_t)(header & 3u) % MAX_BUFFERS, (header & 4u) != 0,
        common, header);
    for (size_t b = 0; b < live_count; b++)
        memset(buffer_known[b], 1, sizeof buffer_known[b]);
    for (size_t at = 0; at < ARENA_LEN; at++)
        arena[at] = (uint8_t)(at * 7u + 0x5au);

    /* The launch, inside a larger struct for a newer caller's tail. */
    struct {
        curd_launch launch;
        unsigned char tail[16];
    } given;
    memset(&given, 0, sizeof given);
    bool explicit_grid;
    decode_launch(&in, &given.launch, &explicit_grid);
    uint8_t sizing = fuzz_u8(&in);
    size_t struct_size = sizeof given.launch;
    bool tail_zero = true;
    switch (sizing & 7u) {
    case 0:
        struct_size = sizeof given.launch - 1u - (sizing >> 3);
        break;
    case 1:
        struct_size = sizeof given;
        tail_zero = (sizing & 8u) == 0;
        given.tail[sizing >> 4] = tail_zero ? 0 : 1;
        break;
    case 2:
        struct_size = sizeof given.launch + 4097u + (sizing >> 3);
        break;
    default:
        break;
    }
    /* Larger than `given` only past the tail the library reads at most:
     * refused before a byte past the known struct is read. */
    given.launch.struct_size = struct_size;
    bool launch_null = (sizing & 0xf8u) == 0xf8u;

    uint8_t count = fuzz_u8(&in);
    size_t nargs = (count & 0xc0u) != 0 ? k->count : (size_t)count % MAX_ARGS;
    bool args_null = nargs > 0 && (count & 0x3fu) == 0x3fu;
    curd_arg args[MAX_ARGS];
    size_t value_used = 0;
    for (size_t i = 0; i < nargs; i++)
        decode_arg(&in, i < k->count ? &k->params[i] : NULL, nargs,
                   freed_now, &value_used, &args[i]);
    const curd_launch *launch = launch_null ? NULL : &given.launch;

    shape run = {{0}, {0}};
    verdict want = reference(k, launch, struct_size, tail_zero, args, nargs,
                             args_null, &run);
    bool one_d = run.grid[1] == 1 && run.grid[2] == 1 && run.block[1] == 1
                 && run.block[2] == 1;
    if (want.status == CURD_OK && one_d && !kernel_is_safe(kind, args, &run)) {
        fuzz_buffers_release();
        return 0;
    }

    curd_stats before = {.struct_size = sizeof before};
    curd_stats after = {.struct_size = sizeof after};
    FUZZ_CHECK(curd_device_stats(device, &before) == CURD_OK);
    if (want.status == CURD_OK && one_d) {
        model_dispatch(kind, args, nargs, launch, &run);
    } else {
        memcpy(arena_before, arena, sizeof arena);
        memset(arena_known, 1, sizeof arena_known);
    }

    curd_status got = run_call(k, launch, args_null ? NULL : args, nargs,
                               async);

    FUZZ_CHECK(curd_device_stats(device, &after) == CURD_OK);
    if (trace)
        fprintf(stderr, "%s, %zu args: %s: %s\n", k->entry, nargs,
                curd_status_name(got),
                got == CURD_OK ? "" : curd_last_error());
    curd_status expected = want.status == CURD_OK && !one_d ? CURD_E_DRIVER
                                                            : want.status;
    if (got != expected) {
        fprintf(stderr, "%s, %zu args: library %s (%s), reference %s"
                        " (argument %zu)\n",
                k->entry, nargs, curd_status_name(got), curd_last_error(),
                curd_status_name(expected), want.arg);
        FUZZ_CHECK(false);
    }
    if (got != CURD_OK) {
        fuzz_check_fix_sentence();
        if (want.arg != NO_ARG && !fuzz_names(curd_last_error(), "argument", want.arg)) {
            fprintf(stderr, "expected argument %zu in: %s\n", want.arg,
                    curd_last_error());
            FUZZ_CHECK(false);
        }
        /* Nothing moved, nothing counted. After a refusal no buffer
         * changed; after the stand-in refused the launch, those bound for
         * writing may have been zeroed. */
        bool written[MAX_BUFFERS] = {false};
        if (want.status == CURD_OK)
            for (size_t i = 0; i < nargs; i++)
                if (args[i].kind == CURD_ARG_BUFFER
                    && args[i].role != CURD_ROLE_INPUT)
                    written[fuzz_live_index(args[i].buffer.id)] = true;
        check_arena();
        check_buffers(written);
        FUZZ_CHECK(after.dispatches == before.dispatches);
        FUZZ_CHECK(after.launches == before.launches);
        FUZZ_CHECK(after.h2d_bytes == before.h2d_bytes);
        FUZZ_CHECK(after.device_pool.live_bytes.current
                   == before.device_pool.live_bytes.current);
        FUZZ_CHECK(after.pinned_pool.live_bytes.current
                   == before.pinned_pool.live_bytes.current);
        fuzz_buffers_release();
        return 0;
    }
    check_arena();
    check_buffers(NULL);
    FUZZ_CHECK(after.dispatches == before.dispatches + 1u);
    FUZZ_CHECK(after.launches == before.launches + given.launch.iterations);
    FUZZ_CHECK(after.device_pool.live_bytes.current
               == before.device_pool.live_bytes.current);
    fuzz_buffers_release();
    return 0;
}
