/* fake.h - what fake-cuda.c and fake-kernels.c share inside the stand-in
 * libcuda (tests/fake/): a module's parsed entries and the host emulation
 * of the kernels in tests/kernels/.
 *
 * fake-kernels.c is pure: it parses module images and runs kernels on host
 * memory, asking fake-cuda.c (through fake_span) how many bytes of fake
 * device memory lie at an address. It keeps no state and takes no lock;
 * fake-cuda.c calls it with its own lock held. */
#ifndef CURD_TESTS_FAKE_FAKE_H
#define CURD_TESTS_FAKE_FAKE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "driver/cuda_abi.h"

#define FAKE_MAX_PARAMS 32
#define FAKE_NAME_BYTES 128

/* The image kinds a module load tells apart by content. */
typedef enum fake_image_kind {
    FAKE_IMAGE_NONE = 0,
    FAKE_IMAGE_PTX,
    FAKE_IMAGE_CUBIN,
    FAKE_IMAGE_FATBIN,
    FAKE_IMAGE_LIBRARY
} fake_image_kind;

typedef struct fake_param {
    uint32_t offset; /* in the kernel's parameter buffer */
    uint32_t size;
} fake_param;

typedef struct fake_entry_info {
    char name[FAKE_NAME_BYTES];
    uint32_t param_count;
    fake_param params[FAKE_MAX_PARAMS];
} fake_entry_info;

typedef struct fake_module_info {
    fake_image_kind kind;
    int ptx_version;           /* .version 8.0 -> 80; 0 for binaries */
    uint32_t static_shared_bytes; /* non-extern .shared declarations */
    uint32_t entry_count;
    fake_entry_info *entries;
} fake_module_info;

/* The kind of an image by its first bytes: PTX text (optional whitespace
 * and comments, then ".version"), an ELF cubin (0x7f 'E' 'L' 'F'), a
 * fatbin (0xBA55ED50, little-endian), a library ("!<arch>\n", only the
 * linker takes one); FAKE_IMAGE_NONE otherwise. */
fake_image_kind fake_image_kind_of(const void *image);

/* The text whose entries a module of this image has: PTX itself; for the
 * stand-in's binaries (it cannot run real machine code), the text that
 * follows the ELF magic (NUL-terminated), or a fatbin's payload
 * (16-byte header: magic, u16 version, u16 header size, u64 payload
 * bytes), or a library's members after its first member header, to
 * image_bytes (which only libraries need). Writes the text's length; NULL
 * when the image is malformed. */
const char *fake_image_text(const void *image, size_t image_bytes,
                            fake_image_kind kind, size_t *out_len);

/* The first function text[0..len) declares ".extern .func" but defines
 * nowhere (a .func line without .extern), into name (NUL-terminated,
 * capacity bytes); false when every one is defined. What ptxas calls an
 * unresolved extern function and nvlink an undefined reference. */
bool fake_ptx_unresolved(const char *text, size_t len, char *name,
                         size_t capacity);

/* Parses the .entry declarations (and their .param lists) of text[0..len)
 * into info (entries calloc'd; free with fake_module_info_free). false
 * when out of memory or a parameter list cannot be read. */
bool fake_module_parse(const char *text, size_t len, fake_module_info *info);
void fake_module_info_free(fake_module_info *info);

/* Bytes of memory a kernel may reach from address to the end of the
 * allocation holding it: fake device memory, or page-locked host memory
 * (allocated or registered), which a device with unified addressing
 * reaches at its host address; 0 when no allocation holds it.
 * fake-cuda.c, lock held. */
size_t fake_span(uint64_t address);

typedef struct fake_launch {
    const fake_entry_info *entry;
    unsigned grid[3];
    unsigned block[3];
    unsigned shared_bytes;
    bool cooperative;
    void **params; /* params[i] points at entry->params[i].size bytes */
} fake_launch;

/* Runs a harness kernel (tests/kernels/) on the host, as the GPU would.
 * CUDA_SUCCESS; CUDA_ERROR_NOT_SUPPORTED for a kernel it does not know or a
 * shape it does not emulate (the harness kernels are 1-D); or a fault
 * the caller makes sticky (CUDA_ERROR_ILLEGAL_ADDRESS for memory outside
 * every allocation, CUDA_ERROR_LAUNCH_FAILED for a trap); or
 * CUDA_ERROR_INVALID_VALUE for a launch the stand-in refuses outright
 * (the grid-barrier kernel without a cooperative launch, which a GPU
 * would hang or fault on). *fault says which: true for a fault. */
curdi_cu_result fake_kernel_run(const fake_launch *launch, bool *fault);

#endif
