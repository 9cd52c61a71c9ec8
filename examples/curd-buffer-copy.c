/*
 * curd-buffer-copy.c - copy a span from one resident buffer into another,
 * on the device, without host memory in between.
 *
 *   cc -std=c11 curd-buffer-copy.c $(pkg-config --cflags --libs curd) \
 *       -o curd-buffer-copy
 *
 * Fills two resident buffers on device 0 with different bytes, copies
 * [src_offset, src_offset + byte_len) of the first into the second at
 * dst_offset with curd_buffer_copy (one DMA), reads the second
 * back, checks every byte (the copied span and the bytes around it), and
 * prints what the device counted.
 *
 * Exit status, as every program curd ships (curd-info, curd-bench and the
 * examples): 0 when all of that holds; 1 when something failed; 2 for a
 * bad command line (the examples take no arguments); 3 when there is no
 * usable CUDA driver or no device (the library's CURD_E_NO_DRIVER or
 * CURD_E_NO_DEVICE sentence, ending in "Fix: ...", says which). Every
 * error goes to standard error as one line starting "curd-buffer-copy: ";
 * standard output carries only results.
 */
#include <curd.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

enum { BYTES = 64 * 1024, SRC_OFFSET = 100, DST_OFFSET = 5000,
       SPAN = 30000 };

static int fail(const char *call, curd_status status)
{
    fprintf(stderr, "curd-buffer-copy: %s: %s: %s\n", call,
            curd_status_name(status), curd_last_error());
    return status == CURD_E_NO_DRIVER || status == CURD_E_NO_DEVICE ? 3 : 1;
}

static unsigned char src_bytes[BYTES], dst_bytes[BYTES], back[BYTES];

static int copy_span(curd_device *device, curd_buffer src, curd_buffer dst)
{
    curd_stats before = CURD_STATS_INIT, after = CURD_STATS_INIT;
    curd_status status = curd_buffer_upload(device, src, src_bytes, BYTES);
    if (status != CURD_OK)
        return fail("curd_buffer_upload", status);
    status = curd_buffer_upload(device, dst, dst_bytes, BYTES);
    if (status != CURD_OK)
        return fail("curd_buffer_upload", status);
    status = curd_device_stats(device, &before);
    if (status != CURD_OK)
        return fail("curd_device_stats", status);
    /* [SRC_OFFSET, SRC_OFFSET + SPAN) of src into dst at DST_OFFSET: the
     * same device twice for a copy within one device. */
    curd_copy copy = {.dst = dst, .dst_offset = DST_OFFSET,
                      .src = src, .src_offset = SRC_OFFSET,
                      .byte_len = SPAN};
    status = curd_buffer_copy(device, device, &copy, 1);
    if (status != CURD_OK)
        return fail("curd_buffer_copy", status);
    status = curd_device_stats(device, &after);
    if (status != CURD_OK)
        return fail("curd_device_stats", status);
    status = curd_buffer_download_range(device, dst, 0, BYTES, back,
                                        sizeof back);
    if (status != CURD_OK)
        return fail("curd_buffer_download_range", status);
    /* What dst must hold now: its own bytes, the span in the middle. */
    memcpy(dst_bytes + DST_OFFSET, src_bytes + SRC_OFFSET, SPAN);
    if (memcmp(back, dst_bytes, BYTES) != 0) {
        fprintf(stderr, "curd-buffer-copy: the destination came back"
                        " wrong\n");
        return 1;
    }
    printf("copied [%d, %d) into [%d, %d): %" PRIu64 " bytes in %" PRIu64
           " DMA\n",
           SRC_OFFSET, SRC_OFFSET + SPAN, DST_OFFSET, DST_OFFSET + SPAN,
           after.d2d_bytes - before.d2d_bytes,
           after.d2d_ops - before.d2d_ops);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1) {
        fprintf(stderr, "curd-buffer-copy: unexpected argument '%s';"
                        " usage: curd-buffer-copy\n",
                argv[1]);
        return 2;
    }
    for (size_t i = 0; i < BYTES; i++) {
        src_bytes[i] = (unsigned char)(i * 7u + 1u);
        dst_bytes[i] = (unsigned char)(i * 13u + 5u);
    }
    curd_device *device = NULL;
    curd_buffer src, dst;
    curd_status status = curd_device_open(0, NULL, &device);
    if (status != CURD_OK)
        return fail("curd_device_open", status);
    int result;
    status = curd_buffer_alloc(device, BYTES, &src);
    if (status == CURD_OK)
        status = curd_buffer_alloc(device, BYTES, &dst);
    result = status == CURD_OK ? copy_span(device, src, dst)
                               : fail("curd_buffer_alloc", status);
    /* Closing frees both buffers. */
    status = curd_device_close(device);
    if (status != CURD_OK && result == 0)
        result = fail("curd_device_close", status);
    return result;
}
