/* fake-kernels.c - module images and kernels for the stand-in libcuda.
 *
 * Two things, both pure (fake.h): reading a module image (its kind, its
 * .entry declarations and their parameter layouts, as ptxas would lay
 * them out), and running the harness kernels of tests/kernels/ (and the
 * one of examples/curd-allreduce.c) on the host. Each emulation does what
 * its .cu (or .ptx) source does, bounds every access by the allocation it
 * lands in (a GPU faults outside it), and is 1-D like the kernels
 * themselves. */
#include "fake.h"
#include "transfer/gather.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------
 * Images
 * ---------------------------------------------------------------------- */
#define FAKE_FATBIN_MAGIC 0xBA55ED50u
#define FAKE_ARCHIVE_MAGIC "!<arch>\n"
/* The magic, then the first member's 60-byte header. */
#define FAKE_ARCHIVE_TEXT_AT (8u + 60u)

static const char *skip_space_and_comments(const char *p)
{
    for (;;) {
        while (*p != '\0' && isspace((unsigned char)*p))
            p++;
        if (p[0] == '/' && p[1] == '/') {
            while (*p != '\0' && *p != '\n')
                p++;
        } else if (p[0] == '/' && p[1] == '*') {
            const char *end = strstr(p + 2, "*/");
            if (end == NULL)
                return p + strlen(p);
            p = end + 2;
        } else {
            return p;
        }
    }
}

fake_image_kind fake_image_kind_of(const void *image)
{
    const unsigned char *bytes = image;
    if (bytes[0] == 0x7f && bytes[1] == 'E' && bytes[2] == 'L' &&
        bytes[3] == 'F')
        return FAKE_IMAGE_CUBIN;
    uint32_t magic = (uint32_t)bytes[0] | (uint32_t)bytes[1] << 8 |
                     (uint32_t)bytes[2] << 16 | (uint32_t)bytes[3] << 24;
    if (magic == FAKE_FATBIN_MAGIC)
        return FAKE_IMAGE_FATBIN;
    /* strncmp stops at a NUL: no read past a short image's end. */
    if (strncmp((const char *)bytes, FAKE_ARCHIVE_MAGIC, 8) == 0)
        return FAKE_IMAGE_LIBRARY;
    const char *text = skip_space_and_comments(image);
    if (strncmp(text, ".version", 8) == 0)
        return FAKE_IMAGE_PTX;
    return FAKE_IMAGE_NONE;
}

const char *fake_image_text(const void *image, size_t image_bytes,
                            fake_image_kind kind, size_t *out_len)
{
    const char *bytes = image;
    switch (kind) {
    case FAKE_IMAGE_LIBRARY:
        if (image_bytes < FAKE_ARCHIVE_TEXT_AT)
            return NULL;
        *out_len = image_bytes - FAKE_ARCHIVE_TEXT_AT;
        return bytes + FAKE_ARCHIVE_TEXT_AT;
    case FAKE_IMAGE_PTX:
        *out_len = strlen(bytes);
        return bytes;
    case FAKE_IMAGE_CUBIN:
        *out_len = strlen(bytes + 4);
        return bytes + 4;
    case FAKE_IMAGE_FATBIN: {
        uint16_t header_bytes;
        uint64_t payload_bytes;
        memcpy(&header_bytes, bytes + 6, sizeof header_bytes);
        memcpy(&payload_bytes, bytes + 8, sizeof payload_bytes);
        if (header_bytes < 16 || payload_bytes > ((uint64_t)1 << 30))
            return NULL;
        *out_len = (size_t)payload_bytes;
        return bytes + header_bytes;
    }
    default:
        return NULL;
    }
}

/* The name of the function declared by the ".func" at p: past its return
 * parameters, if any; an empty name when there is none. */
static void func_name(const char *p, const char *end, char *name,
                      size_t capacity)
{
    p += 5;
    while (p < end && isspace((unsigned char)*p))
        p++;
    if (p < end && *p == '(') {
        const char *close = memchr(p, ')', (size_t)(end - p));
        p = close != NULL ? close + 1 : end;
    }
    while (p < end && isspace((unsigned char)*p))
        p++;
    size_t n = 0;
    while (p + n < end && n + 1 < capacity &&
           (isalnum((unsigned char)p[n]) || p[n] == '_' || p[n] == '$'))
        n++;
    memcpy(name, p, n);
    name[n] = '\0';
}

/* Whether the ".func" at p follows ".extern" on its line. */
static bool func_is_extern(const char *text, const char *p)
{
    const char *line = p;
    while (line > text && line[-1] != '\n')
        line--;
    const char *found = strstr(line, ".extern");
    return found != NULL && found < p;
}

bool fake_ptx_unresolved(const char *text, size_t len, char *name,
                         size_t capacity)
{
    const char *end = text + len;
    for (const char *p = strstr(text, ".func"); p != NULL && p < end;
         p = strstr(p + 5, ".func")) {
        if (!func_is_extern(text, p))
            continue;
        char wanted[FAKE_NAME_BYTES];
        func_name(p, end, wanted, sizeof wanted);
        bool defined = false;
        for (const char *q = strstr(text, ".func"); q != NULL && q < end &&
                                                    !defined;
             q = strstr(q + 5, ".func")) {
            char have[FAKE_NAME_BYTES];
            func_name(q, end, have, sizeof have);
            defined = !func_is_extern(text, q) && strcmp(have, wanted) == 0;
        }
        if (!defined) {
            snprintf(name, capacity, "%s", wanted);
            return true;
        }
    }
    return false;
}

/* ------------------------------------------------------------------------
 * Entries and parameter layouts
 * ---------------------------------------------------------------------- */
static uint32_t type_bytes(const char *token, size_t len)
{
    static const struct {
        const char *name;
        uint32_t bytes;
    } types[] = {
        {".u8", 1},  {".s8", 1},  {".b8", 1},  {".u16", 2}, {".s16", 2},
        {".b16", 2}, {".f16", 2}, {".u32", 4}, {".s32", 4}, {".b32", 4},
        {".f32", 4}, {".u64", 8}, {".s64", 8}, {".b64", 8}, {".f64", 8},
    };
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (strlen(types[i].name) == len &&
            strncmp(types[i].name, token, len) == 0)
            return types[i].bytes;
    return 0;
}

/* One ".param ..." declaration in [p, end): its size and alignment.
 * Accepts ".param .u64 x", ".param .align 8 .b8 s[16]", and the pointer
 * annotations other compilers write (".param .u64 .ptr .global .align 16
 * x", where the .align is the pointee's). */
static bool parse_param(const char *p, const char *end, uint32_t *out_size,
                        uint32_t *out_align)
{
    uint32_t element = 0, align = 0, count = 1;
    bool pointer = false, seen_param = false;
    while (p < end) {
        while (p < end && isspace((unsigned char)*p))
            p++;
        const char *token = p;
        while (p < end && !isspace((unsigned char)*p) && *p != '[')
            p++;
        size_t len = (size_t)(p - token);
        if (len == 0) {
            if (p < end && *p == '[') {
                count = (uint32_t)strtoul(p + 1, NULL, 10);
                while (p < end && *p != ']')
                    p++;
                if (p < end)
                    p++;
            }
            continue;
        }
        if (len == 6 && strncmp(token, ".param", 6) == 0) {
            seen_param = true;
        } else if (len == 4 && strncmp(token, ".ptr", 4) == 0) {
            pointer = true;
        } else if (len == 6 && strncmp(token, ".align", 6) == 0) {
            while (p < end && isspace((unsigned char)*p))
                p++;
            uint32_t value = (uint32_t)strtoul(p, NULL, 10);
            while (p < end && isdigit((unsigned char)*p))
                p++;
            if (!pointer)
                align = value;
        } else if (type_bytes(token, len) != 0 && element == 0) {
            element = type_bytes(token, len);
        }
        /* Anything else (.global, the name) needs nothing. */
    }
    if (!seen_param || element == 0 || count == 0)
        return false;
    *out_size = element * count;
    *out_align = align != 0 ? align : element;
    return true;
}

static bool parse_params(const char *open, const char *limit,
                         fake_entry_info *entry)
{
    const char *close = memchr(open, ')', (size_t)(limit - open));
    if (close == NULL)
        return false;
    uint32_t offset = 0;
    const char *p = open + 1;
    while (p < close) {
        const char *comma = memchr(p, ',', (size_t)(close - p));
        const char *end = comma != NULL ? comma : close;
        const char *q = p;
        while (q < end && isspace((unsigned char)*q))
            q++;
        if (q < end) {
            uint32_t size, align;
            if (!parse_param(q, end, &size, &align) ||
                entry->param_count == FAKE_MAX_PARAMS || align == 0)
                return false;
            offset = (offset + align - 1) / align * align;
            entry->params[entry->param_count].offset = offset;
            entry->params[entry->param_count].size = size;
            entry->param_count++;
            offset += size;
        }
        p = end + 1;
    }
    return true;
}

/* The sum of the module's non-extern .shared declarations, in bytes. */
static uint32_t static_shared_bytes(const char *text, size_t len)
{
    uint32_t total = 0;
    const char *end = text + len;
    for (const char *p = text; p < end; p++) {
        if (*p != '\n')
            continue;
        const char *q = p + 1;
        while (q < end && (*q == ' ' || *q == '\t'))
            q++;
        if ((size_t)(end - q) < 7 || strncmp(q, ".shared", 7) != 0)
            continue;
        const char *line_end = memchr(q, '\n', (size_t)(end - q));
        if (line_end == NULL)
            line_end = end;
        uint32_t element = 0, count = 1;
        for (const char *t = q + 7; t < line_end; t++) {
            if (*t == '.' && element == 0) {
                size_t n = 1;
                while (t + n < line_end && isalnum((unsigned char)t[n]))
                    n++;
                element = type_bytes(t, n);
            } else if (*t == '[') {
                count = (uint32_t)strtoul(t + 1, NULL, 10);
            }
        }
        total += element * count;
    }
    return total;
}

bool fake_module_parse(const char *text, size_t len, fake_module_info *info)
{
    memset(info, 0, sizeof *info);
    const char *end = text + len;
    const char *version = strstr(text, ".version");
    if (version != NULL && version < end) {
        int major = 0, minor = 0;
        if (sscanf(version + 8, " %d.%d", &major, &minor) == 2)
            info->ptx_version = major * 10 + minor;
    }
    info->static_shared_bytes = static_shared_bytes(text, len);
    for (const char *p = text; p < end;) {
        const char *found = strstr(p, ".entry");
        if (found == NULL || found >= end)
            break;
        p = found + 6;
        if (!isspace((unsigned char)*p))
            continue;
        while (p < end && isspace((unsigned char)*p))
            p++;
        const char *name = p;
        while (p < end && (isalnum((unsigned char)*p) || *p == '_' ||
                           *p == '$' || *p == '.'))
            p++;
        size_t name_len = (size_t)(p - name);
        if (name_len == 0 || name_len >= FAKE_NAME_BYTES)
            continue;
        fake_entry_info *grown =
            realloc(info->entries, (info->entry_count + 1) * sizeof *grown);
        if (grown == NULL)
            goto fail;
        info->entries = grown;
        fake_entry_info *entry = &info->entries[info->entry_count];
        memset(entry, 0, sizeof *entry);
        memcpy(entry->name, name, name_len);
        while (p < end && isspace((unsigned char)*p))
            p++;
        if (p < end && *p == '(' && !parse_params(p, end, entry))
            goto fail;
        info->entry_count++;
    }
    return true;
fail:
    fake_module_info_free(info);
    return false;
}

void fake_module_info_free(fake_module_info *info)
{
    free(info->entries);
    memset(info, 0, sizeof *info);
}

/* ------------------------------------------------------------------------
 * Kernels
 * ---------------------------------------------------------------------- */
/* Parameter i of a launch, of at most `size` bytes (zero-extended). */
static uint64_t arg_u64(const fake_launch *launch, uint32_t i)
{
    uint64_t value = 0;
    uint32_t size = launch->entry->params[i].size;
    memcpy(&value, launch->params[i], size < 8 ? size : 8);
    return value;
}

static void *arg_ptr(const fake_launch *launch, uint32_t i)
{
    return (void *)(uintptr_t)arg_u64(launch, i);
}

/* Whether [address, address + byte_len) lies inside one allocation. */
static bool in_memory(const void *address, uint64_t byte_len)
{
    return byte_len == 0 || fake_span((uint64_t)(uintptr_t)address) >= byte_len;
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

typedef curdi_cu_result (*kernel_fn)(const fake_launch *launch, uint64_t threads);

#define FAULT CURDI_CUDA_ERROR_ILLEGAL_ADDRESS

/* out[i] = in[i] ^ 0x5A for i < byte_len (lib/selftest.c). */
static curdi_cu_result run_selftest_xor(const fake_launch *launch,
                                        uint64_t threads)
{
    uint8_t *in = arg_ptr(launch, 0), *out = arg_ptr(launch, 1);
    uint64_t n = min_u64(arg_u64(launch, 2), threads);
    if (!in_memory(in, n) || !in_memory(out, n))
        return FAULT;
    for (uint64_t i = 0; i < n; i++)
        out[i] = (uint8_t)(in[i] ^ 0x5A);
    return CURDI_CUDA_SUCCESS;
}

/* add_one.cu */
static curdi_cu_result run_add_one(const fake_launch *launch, uint64_t threads)
{
    uint32_t *data = arg_ptr(launch, 0);
    uint64_t n = min_u64((uint32_t)arg_u64(launch, 1), threads);
    if (!in_memory(data, n * 4))
        return FAULT;
    for (uint64_t i = 0; i < n; i++)
        data[i] += 1u;
    return CURDI_CUDA_SUCCESS;
}

/* link_apply.cu, calling link_mix.cu's curd_link_mix. */
static curdi_cu_result run_link_apply(const fake_launch *launch,
                                      uint64_t threads)
{
    const uint32_t *in = arg_ptr(launch, 0);
    uint32_t *out = arg_ptr(launch, 1);
    uint64_t n = min_u64((uint32_t)arg_u64(launch, 2), threads);
    uint32_t key = (uint32_t)arg_u64(launch, 3);
    if (!in_memory(in, n * 4) || !in_memory(out, n * 4))
        return FAULT;
    for (uint64_t i = 0; i < n; i++) {
        uint32_t x = (in[i] ^ key) * 0x9E3779B1u;
        out[i] = x ^ (x >> 16);
    }
    return CURDI_CUDA_SUCCESS;
}

/* examples/curd-allreduce.c's kernel: data[i] = i * scale (mod 2^32). */
static curdi_cu_result run_scaled_index(const fake_launch *launch,
                                        uint64_t threads)
{
    uint32_t *data = arg_ptr(launch, 0);
    uint64_t n = min_u64((uint32_t)arg_u64(launch, 1), threads);
    uint32_t scale = (uint32_t)arg_u64(launch, 2);
    if (!in_memory(data, n * 4))
        return FAULT;
    for (uint64_t i = 0; i < n; i++)
        data[i] = (uint32_t)i * scale;
    return CURDI_CUDA_SUCCESS;
}

/* saxpy.cu: one rounding, as the GPU's fmaf. */
static curdi_cu_result run_saxpy(const fake_launch *launch, uint64_t threads)
{
    const float *x = arg_ptr(launch, 0);
    float a;
    memcpy(&a, launch->params[1], sizeof a);
    float *y = arg_ptr(launch, 2);
    uint64_t n = min_u64((uint32_t)arg_u64(launch, 3), threads);
    if (!in_memory(x, n * 4) || !in_memory(y, n * 4))
        return FAULT;
    for (uint64_t i = 0; i < n; i++)
        y[i] = fmaf(a, x[i], y[i]);
    return CURDI_CUDA_SUCCESS;
}

/* reduce_sum.cu: a grid-stride loop covers all of in[0..n). */
static curdi_cu_result run_reduce_sum(const fake_launch *launch,
                                      uint64_t threads)
{
    (void)threads;
    const uint32_t *in = arg_ptr(launch, 0);
    uint64_t n = (uint32_t)arg_u64(launch, 1);
    uint64_t *sum = arg_ptr(launch, 2);
    if (!in_memory(in, n * 4))
        return FAULT;
    uint64_t total = 0;
    for (uint64_t i = 0; i < n; i++)
        total += in[i];
    if (total != 0) {
        if (!in_memory(sum, 8))
            return FAULT;
        *sum += total;
    }
    return CURDI_CUDA_SUCCESS;
}

/* bfs_step.cu. Sequential order gives the GPU's result: a vertex reached
 * in this launch has level + 1, so it is not expanded again here. */
static curdi_cu_result run_bfs_step(const fake_launch *launch,
                                    uint64_t threads)
{
    const uint32_t *row_offsets = arg_ptr(launch, 0);
    const uint32_t *columns = arg_ptr(launch, 1);
    uint32_t *levels = arg_ptr(launch, 2);
    uint64_t vertex_count = min_u64((uint32_t)arg_u64(launch, 3), threads);
    uint32_t level = (uint32_t)arg_u64(launch, 4);
    uint32_t *changed = arg_ptr(launch, 5);
    uint64_t levels_len =
        fake_span((uint64_t)(uintptr_t)levels) / sizeof *levels;
    uint64_t rows_len =
        fake_span((uint64_t)(uintptr_t)row_offsets) / sizeof *row_offsets;
    uint64_t columns_len =
        fake_span((uint64_t)(uintptr_t)columns) / sizeof *columns;
    if (levels_len < vertex_count)
        return FAULT;
    for (uint64_t v = 0; v < vertex_count; v++) {
        if (levels[v] != level)
            continue;
        if (rows_len < v + 2)
            return FAULT;
        for (uint32_t e = row_offsets[v]; e < row_offsets[v + 1]; e++) {
            if (e >= columns_len)
                return FAULT;
            uint32_t w = columns[e];
            if (w >= levels_len)
                return FAULT;
            if (levels[w] == 0xFFFFFFFFu) {
                levels[w] = level + 1u;
                if (!in_memory(changed, 4))
                    return FAULT;
                *changed = 1u;
            }
        }
    }
    return CURDI_CUDA_SUCCESS;
}

/* coop_sum.cu: partial sums per block, a grid barrier, the total to every
 * thread. */
static curdi_cu_result run_coop_sum(const fake_launch *launch,
                                    uint64_t threads)
{
    if (!launch->cooperative)
        return CURDI_CUDA_ERROR_INVALID_VALUE;
    const uint32_t *in = arg_ptr(launch, 0);
    uint64_t n = (uint32_t)arg_u64(launch, 1);
    uint64_t *partial = arg_ptr(launch, 2);
    uint64_t *out = arg_ptr(launch, 3);
    uint64_t blocks = launch->grid[0], block = launch->block[0];
    if (!in_memory(in, n * 4) || !in_memory(partial, blocks * 8) ||
        !in_memory(out, threads * 8))
        return FAULT;
    for (uint64_t b = 0; b < blocks; b++) {
        uint64_t sum = 0;
        for (uint64_t t = 0; t < block; t++)
            for (uint64_t i = b * block + t; i < n; i += threads)
                sum += in[i];
        partial[b] = sum;
    }
    uint64_t total = 0;
    for (uint64_t b = 0; b < blocks; b++)
        total += partial[b];
    for (uint64_t t = 0; t < threads; t++)
        out[t] = total;
    return CURDI_CUDA_SUCCESS;
}

/* scalars.cu: every parameter's bytes, in the layout the .cu describes. */
static curdi_cu_result run_scalars(const fake_launch *launch,
                                   uint64_t threads)
{
    (void)threads;
    uint8_t *out = arg_ptr(launch, 1);
    uint32_t *out2 = arg_ptr(launch, 7);
    if (!in_memory(out, 72) || !in_memory(out2, 12))
        return FAULT;
    memset(out, 0, 48);
    memcpy(out + 0, launch->params[0], 1);
    memcpy(out + 2, launch->params[2], 2);
    memcpy(out + 4, launch->params[3], 4);
    memcpy(out + 8, launch->params[5], 8);
    memcpy(out + 16, launch->params[4], 16);
    memcpy(out + 32, launch->params[6], 12);
    memcpy(out + 44, launch->params[8], 1);
    uint64_t mark = (uint64_t)(uintptr_t)out2;
    memcpy(out + 48, &mark, 8);
    memset(out + 56, 0xA5, 16);
    memcpy(out2, launch->params[6], 12);
    return CURDI_CUDA_SUCCESS;
}

/* shared_reverse.cu: a tile larger than the dynamic shared memory given
 * overruns it, which a GPU reports as an illegal address. */
static curdi_cu_result run_shared_reverse(const fake_launch *launch,
                                          uint64_t threads)
{
    (void)threads;
    const uint32_t *in = arg_ptr(launch, 0);
    uint32_t *out = arg_ptr(launch, 1);
    uint64_t tile = (uint32_t)arg_u64(launch, 2);
    uint64_t blocks = launch->grid[0];
    if (tile * 4 > launch->shared_bytes || !in_memory(in, blocks * tile * 4) ||
        !in_memory(out, blocks * tile * 4))
        return FAULT;
    for (uint64_t b = 0; b < blocks; b++)
        for (uint64_t i = 0; i < tile; i++)
            out[b * tile + i] = in[b * tile + tile - 1 - i];
    return CURDI_CUDA_SUCCESS;
}

/* fault.cu */
static curdi_cu_result run_fault(const fake_launch *launch, uint64_t threads)
{
    (void)threads;
    uint8_t *target = arg_ptr(launch, 0);
    uint64_t offset = arg_u64(launch, 1);
    if ((uint32_t)arg_u64(launch, 2) != 0)
        return CURDI_CUDA_ERROR_LAUNCH_FAILED;
    uint8_t *address = (uint8_t *)(uintptr_t)((uintptr_t)target + offset);
    if (!in_memory(address, 4))
        return FAULT;
    uint32_t value = 0xDEADu;
    memcpy(address, &value, 4);
    return CURDI_CUDA_SUCCESS;
}

/* hand_fill.ptx: scalars, then the pointer, then an unused pointer. */
static curdi_cu_result run_hand_fill(const fake_launch *launch,
                                     uint64_t threads)
{
    uint64_t n = min_u64((uint32_t)arg_u64(launch, 0), threads);
    uint32_t value = (uint32_t)arg_u64(launch, 1);
    uint32_t *out = arg_ptr(launch, 2);
    if (!in_memory(out, n * 4))
        return FAULT;
    for (uint64_t i = 0; i < n; i++)
        out[i] = value + (uint32_t)i;
    return CURDI_CUDA_SUCCESS;
}

/* lib/transfer/gather.cu: curd_gather and curd_scatter, block by block and thread
 * by thread as the GPU runs them, so the grid the library sizes and the
 * kernel's tiling, search and alignment cases are what the tests check;
 * then curd_gather's signal words, when its table asks for them.
 * The parameter table is lib/transfer/gather.h's. */

/* copy_range and copy_words: what each of the block's threads copies. */
static void gather_copy_range(uint8_t *dst, const uint8_t *src, uint32_t n,
                              uint32_t threads)
{
    uint64_t mismatch = (uint64_t)(uintptr_t)dst ^ (uint64_t)(uintptr_t)src;
    uint32_t unit = (mismatch & 15u) == 0 ? 16u : (mismatch & 3u) == 0 ? 4u : 1u;
    uint32_t head = unit == 1u ? 0u
                               : (uint32_t)(-(uint64_t)(uintptr_t)dst & (unit - 1u));
    if (head > n)
        head = n;
    uint32_t words = (n - head) / unit;
    uint32_t done = head + words * unit;
    for (uint32_t t = 0; t < threads; t++) {
        if (t < head)
            dst[t] = src[t];
        for (uint64_t i = t; i < words; i += threads)
            memcpy(dst + head + i * unit, src + head + i * unit, unit);
        if (t < n - done)
            dst[done + t] = src[done + t];
    }
}

static curdi_cu_result run_gather_move(const fake_launch *launch, bool to_stage)
{
    uint8_t *stage = arg_ptr(launch, 0);
    curdi_gather_table table;
    if (launch->entry->params[1].size != sizeof table)
        return CURDI_CUDA_ERROR_NOT_SUPPORTED;
    memcpy(&table, launch->params[1], sizeof table);
    if (table.count == 0 || table.count > CURDI_GATHER_PIECES)
        return CURDI_CUDA_ERROR_INVALID_VALUE;
    for (uint64_t block = 0; block < launch->grid[0]; block++) {
        uint64_t tile_start =
            table.range_start + block * CURDI_GATHER_TILE_BYTES;
        if (tile_start >= table.range_end)
            continue;
        uint64_t tile_end =
            min_u64(tile_start + CURDI_GATHER_TILE_BYTES, table.range_end);
        uint32_t low = 0, high = table.count;
        while (high - low > 1) {
            uint32_t middle = (low + high) / 2u;
            if (table.piece[middle].stage_offset <= tile_start)
                low = middle;
            else
                high = middle;
        }
        for (uint32_t i = low; i < table.count; i++) {
            const curdi_gather_piece *piece = &table.piece[i];
            uint64_t start = piece->stage_offset;
            uint64_t end = start + piece->byte_len;
            if (start >= tile_end)
                break;
            uint64_t from = start > tile_start ? start : tile_start;
            uint64_t to = end < tile_end ? end : tile_end;
            if (from >= to)
                continue;
            uint8_t *device = (uint8_t *)(uintptr_t)piece->device_ptr + (from - start);
            if (!in_memory(device, to - from) || !in_memory(stage + from, to - from))
                return FAULT;
            if (to_stage)
                gather_copy_range(stage + from, device, (uint32_t)(to - from),
                                  launch->block[0]);
            else
                gather_copy_range(device, stage + from, (uint32_t)(to - from),
                                  launch->block[0]);
        }
    }
    /* curd_gather's signal: each block's word, once its bytes are written. */
    if (to_stage && table.signal_offset != 0) {
        uint32_t *words = (uint32_t *)(void *)(stage + table.signal_offset);
        if (!in_memory(words, launch->grid[0] * sizeof *words))
            return FAULT;
        for (uint64_t block = 0; block < launch->grid[0]; block++)
            __atomic_store_n(&words[block], 1u, __ATOMIC_RELEASE);
    }
    return CURDI_CUDA_SUCCESS;
}

static curdi_cu_result run_gather(const fake_launch *launch, uint64_t threads)
{
    (void)threads;
    return run_gather_move(launch, true);
}

static curdi_cu_result run_scatter(const fake_launch *launch, uint64_t threads)
{
    (void)threads;
    return run_gather_move(launch, false);
}

static const struct {
    const char *name;
    uint32_t param_count;
    kernel_fn run;
} kernels[] = {
    {"curd_gather", 2, run_gather},
    {"curd_scatter", 2, run_scatter},
    {"curd_selftest_xor", 3, run_selftest_xor},
    {"curd_link_apply", 4, run_link_apply},
    {"curd_add_one", 2, run_add_one},
    {"curd_saxpy", 4, run_saxpy},
    {"curd_reduce_sum", 3, run_reduce_sum},
    {"curd_bfs_step", 6, run_bfs_step},
    {"curd_coop_sum", 4, run_coop_sum},
    {"curd_scalars", 9, run_scalars},
    {"curd_shared_reverse", 3, run_shared_reverse},
    {"curd_fault", 3, run_fault},
    {"curd_hand_fill", 4, run_hand_fill},
    {"curd_scaled_index", 3, run_scaled_index},
};

curdi_cu_result fake_kernel_run(const fake_launch *launch, bool *fault)
{
    *fault = false;
    const fake_entry_info *entry = launch->entry;
    for (size_t i = 0; i < sizeof kernels / sizeof kernels[0]; i++) {
        if (strcmp(kernels[i].name, entry->name) != 0)
            continue;
        /* The harness kernels index in x only. */
        if (entry->param_count != kernels[i].param_count ||
            launch->grid[1] != 1 || launch->grid[2] != 1 ||
            launch->block[1] != 1 || launch->block[2] != 1)
            return CURDI_CUDA_ERROR_NOT_SUPPORTED;
        curdi_cu_result rc = kernels[i].run(
            launch, (uint64_t)launch->grid[0] * launch->block[0]);
        *fault = rc == CURDI_CUDA_ERROR_ILLEGAL_ADDRESS ||
                 rc == CURDI_CUDA_ERROR_LAUNCH_FAILED;
        return rc;
    }
    return CURDI_CUDA_ERROR_NOT_SUPPORTED;
}
