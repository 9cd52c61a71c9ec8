/* jit.h - what curd hands the driver's JIT and its linker: a load's JIT
 * options as the driver's option arrays, the two logs (error and verbose
 * information) that every JIT and link writes, and the link itself
 * (cuLinkCreate, cuLinkAddData per input, cuLinkComplete, cuLinkDestroy).
 * The program module uses it for every module it loads; it keeps no state.
 *
 * Driver calls need the device's context current; no lock is held. */
#ifndef CURD_LIB_LAUNCH_JIT_H
#define CURD_LIB_LAUNCH_JIT_H

#include <stddef.h>
#include <stdint.h>

#include "curd.h"
#include "driver/cuda_abi.h"

/* Each log buffer the driver writes into. */
#define CURDI_JIT_LOG_BYTES 4096u
/* The logs (4 options), verbose (1) and the four JIT options. */
#define CURDI_JIT_OPTION_MAX 9u

/* A load's JIT options (curd_program_desc, curd 1.1), hashed into the
 * module cache's key and compared on a hit. */
typedef struct curdi_jit_options {
    uint32_t optimization_level; /* UINT32_MAX: the driver's default */
    uint32_t max_registers;      /* 0: no limit */
    uint32_t target;             /* 0: from the context */
    uint32_t line_info;          /* 0 or 1 */
} curdi_jit_options;

/* The driver's error and information logs of one JIT or link. */
typedef struct curdi_jit_logs {
    char *error;
    char *info;
} curdi_jit_logs;

/* Allocates both logs, zeroed; CURD_E_OUT_OF_MEMORY (nothing allocated)
 * otherwise. */
curd_status curdi_jit_logs_new(curdi_jit_logs *logs);
void curdi_jit_logs_free(curdi_jit_logs *logs);
/* Hands over the information log (NULL when the driver wrote nothing, and
 * then freed): what curd_program_log gives. */
char *curdi_jit_logs_take_info(curdi_jit_logs *logs);
/* The error log on one line, its line breaks made "; " (a trailing one
 * goes), in place of logs->error (kept as it was when no memory). */
void curdi_jit_logs_error_one_line(curdi_jit_logs *logs);

/* The arrays cuModuleLoadDataEx and cuLinkCreate take: the logs (the
 * information log verbose: what ptxas says of registers and spills), then
 * every option given. Options whose value is an unsigned int travel in
 * the pointer, as the driver wants them. */
typedef struct curdi_jit_option_list {
    curdi_cu_jit_option options[CURDI_JIT_OPTION_MAX];
    void *values[CURDI_JIT_OPTION_MAX];
    unsigned count;
} curdi_jit_option_list;

void curdi_jit_option_list_make(const curdi_jit_options *jit,
                                const curdi_jit_logs *logs,
                                curdi_jit_option_list *out);

/* One input of a link: checked bytes (curdi_image_check), PTX
 * NUL-terminated at bytes[byte_len], and the name the linker's log gives
 * it. */
typedef struct curdi_link_input {
    const unsigned char *bytes;
    size_t byte_len;
    curd_image_kind kind;
    const char *name;
} curdi_link_input;

/* Links the inputs, in order, with the JIT options, through the driver's
 * linker. On CURD_OK *out_cubin is a malloc'd copy of the linked cubin of
 * *out_cubin_bytes bytes, and logs->info holds the linker's information
 * log. Otherwise nothing is allocated and the status is the driver's
 * (out of memory, device lost, ...), or CURD_E_PROGRAM for inputs the
 * linker refused, with the error log in the sentence, which names `entry`
 * (for the reader: the load the link was for). cuLinkDestroy is called on
 * every path after cuLinkCreate; a failure of it is only traced. */
curd_status curdi_jit_link(const curdi_link_input *inputs, size_t count,
                           const curdi_jit_options *jit, const char *entry,
                           curdi_jit_logs *logs, void **out_cubin,
                           size_t *out_cubin_bytes);

#endif
