/*
 * curd-download-range.c - read part of a resident buffer back into host
 * memory of a stated capacity.
 *
 *   cc -std=c11 curd-download-range.c $(pkg-config --cflags --libs curd) \
 *       -o curd-download-range
 *
 * Uploads 1 MiB into a resident buffer on device 0, reads the bytes
 * [offset, offset + byte_len) back with curd_buffer_download_range into a
 * destination that says how many bytes it holds, checks every byte, and
 * shows that a read larger than the destination is refused (CURD_E_RANGE)
 * before any byte moves.
 *
 * Exit status, as every program curd ships (curd-info, curd-bench and the
 * examples): 0 when all of that holds; 1 when something failed; 2 for a
 * bad command line (the examples take no arguments); 3 when there is no
 * usable CUDA driver or no device (the library's CURD_E_NO_DRIVER or
 * CURD_E_NO_DEVICE sentence, ending in "Fix: ...", says which). Every
 * error goes to standard error as one line starting
 * "curd-download-range: "; standard output carries only results.
 */
#include <curd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { BUFFER_BYTES = 1 << 20, OFFSET = 4096 + 7, PART_BYTES = 1000 };

static int fail(const char *call, curd_status status)
{
    /* curd_status_name leaves the thread's sentence as it is, so both may
     * be read in one argument list. */
    fprintf(stderr, "curd-download-range: %s: %s: %s\n", call,
            curd_status_name(status), curd_last_error());
    return status == CURD_E_NO_DRIVER || status == CURD_E_NO_DEVICE ? 3 : 1;
}

static int read_part(curd_device *device, curd_buffer buffer,
                     const unsigned char *bytes)
{
    unsigned char part[PART_BYTES];
    memset(part, 0xEE, sizeof part);
    curd_status status = curd_buffer_upload(device, buffer, bytes,
                                            BUFFER_BYTES);
    if (status != CURD_OK)
        return fail("curd_buffer_upload", status);
    /* [OFFSET, OFFSET + sizeof part) into part, which holds sizeof part. */
    status = curd_buffer_download_range(device, buffer, OFFSET, sizeof part,
                                        part, sizeof part);
    if (status != CURD_OK)
        return fail("curd_buffer_download_range", status);
    if (memcmp(part, bytes + OFFSET, sizeof part) != 0) {
        fprintf(stderr, "curd-download-range: the part came back wrong\n");
        return 1;
    }
    printf("read [%d, %d) of a %d-byte buffer: every byte matches\n",
           OFFSET, OFFSET + PART_BYTES, BUFFER_BYTES);
    /* Twice the bytes into the same destination: refused, nothing
     * written. */
    status = curd_buffer_download_range(device, buffer, 0, 2 * sizeof part,
                                        part, sizeof part);
    if (status != CURD_E_RANGE) {
        fprintf(stderr, "curd-download-range: an oversized read returned"
                        " %s, not CURD_E_RANGE\n",
                curd_status_name(status));
        return 1;
    }
    printf("a read of %zu bytes into %zu was refused: %s\n",
           2 * sizeof part, sizeof part, curd_status_name(status));
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1) {
        fprintf(stderr, "curd-download-range: unexpected argument '%s';"
                        " usage: curd-download-range\n",
                argv[1]);
        return 2;
    }
    unsigned char *bytes = malloc(BUFFER_BYTES);
    if (bytes == NULL) {
        fprintf(stderr, "curd-download-range: out of host memory\n");
        return 1;
    }
    for (size_t i = 0; i < BUFFER_BYTES; i++)
        bytes[i] = (unsigned char)(i * 131u + 7u);

    curd_device *device = NULL;
    curd_buffer buffer;
    int result;
    curd_status status = curd_device_open(0, NULL, &device);
    if (status != CURD_OK) {
        free(bytes);
        return fail("curd_device_open", status);
    }
    status = curd_buffer_alloc(device, BUFFER_BYTES, &buffer);
    result = status == CURD_OK ? read_part(device, buffer, bytes)
                               : fail("curd_buffer_alloc", status);
    /* Closing frees the buffer too. */
    status = curd_device_close(device);
    if (status != CURD_OK && result == 0)
        result = fail("curd_device_close", status);
    free(bytes);
    return result;
}
